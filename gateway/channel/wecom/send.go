package wecom

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// streamLimit bounds a stream's content in characters: the platform
// takes 20,480 bytes.
const streamLimit = 6000

// rateLimited are the errcodes that ask to slow down (45009: the API's
// frequency limit; 45033: too many at once).
var rateLimited = map[int]bool{45009: true, 45033: true}

// ackError is the platform's refusal of a reply or a push.
type ackError struct {
	cmd  string
	code int
	msg  string
}

func (e *ackError) Error() string {
	return fmt.Sprintf("wecom %s: errcode %d: %s", e.cmd, e.code, e.msg)
}

// refused reports whether err is the platform's refusal, not a rate
// limit nor a lost connection.
func refused(err error) bool {
	var ae *ackError
	var ra *channel.RetryAfter
	return errors.As(err, &ae) && !errors.As(err, &ra)
}

func decryptFile(path string, key []byte) error {
	data, err := os.ReadFile(path)
	if err == nil {
		data, err = Decrypt(data, key)
	}
	if err == nil {
		err = os.WriteFile(path, data, 0o600)
	}
	if err != nil {
		os.Remove(path) //nolint:errcheck // an undecryptable file is of no use
		return fmt.Errorf("decrypting %s: %w", filepath.Base(path), err)
	}
	return nil
}

// send writes a command to a chat, paced, and waits for its answer.
func (c *Channel) send(ctx context.Context, chatID string, f Frame) error {
	if err := c.pacer.Wait(ctx, chatID); err != nil {
		return err
	}
	_, err := c.call(ctx, chatID, f)
	return err
}

// call writes a command and returns its answer: an error when the
// platform refused it (a *channel.RetryAfter for chatID when it asked to
// slow down).
func (c *Channel) call(ctx context.Context, chatID string, f Frame) (Frame, error) {
	c.mu.Lock()
	k := c.conn
	c.mu.Unlock()
	if k == nil {
		return Frame{}, errors.New("wecom: not connected: the answer waits for the long connection")
	}
	a, err := k.request(ctx, f)
	if err != nil {
		return Frame{}, fmt.Errorf("wecom %s: %w", f.Cmd, err)
	}
	if a.ErrCode != nil && *a.ErrCode != 0 {
		e := &ackError{cmd: f.Cmd, code: *a.ErrCode, msg: a.ErrMsg}
		if rateLimited[e.code] {
			c.pacer.Defer(chatID, time.Second)
			return Frame{}, &channel.RetryAfter{After: time.Second, Err: e}
		}
		return Frame{}, e
	}
	return a, nil
}

// respond writes piece to r's stream: progress (finish false) or the
// answer (finish true), which closes it.
func (c *Channel) respond(ctx context.Context, chatID string, r *reply, piece string, finish bool) error {
	body, _ := json.Marshal(map[string]any{"msgtype": "stream", "stream": map[string]any{"id": r.stream, "finish": finish, "content": piece}})
	err := c.send(ctx, chatID, Frame{Cmd: CmdRespond, Headers: FrameHeaders{ReqID: r.reqID}, Body: body})
	if err == nil && finish || refused(err) {
		// Finished, or refused (an expired req_id): the rest is pushed.
		c.mu.Lock()
		r.finished = true
		c.mu.Unlock()
	}
	return err
}

// push sends piece to the chat as Markdown, outside any message's reply.
func (c *Channel) push(ctx context.Context, chatID, piece string) (string, error) {
	body, _ := json.Marshal(map[string]any{"chatid": chatID, "msgtype": "markdown", "markdown": map[string]string{"content": piece}})
	f := Frame{Cmd: CmdSend, Headers: FrameHeaders{ReqID: ReqID(CmdSend)}, Body: body}
	if err := c.send(ctx, chatID, f); err != nil {
		return "", err
	}
	return f.Headers.ReqID, nil
}

// replyFor is the open stream m can answer on: the one of the message it
// answers (ReplyTo), else of the chat's last message, as nanobot does;
// nil when there is none, it is finished, or it is older than the reply
// window.
func (c *Channel) replyFor(m bus.Outbound) *reply {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.replies[m.ReplyTo]
	if r == nil || r.chat != m.ChatID {
		r = c.latest[m.ChatID]
	}
	if r == nil || r.finished || time.Since(r.at) > replyWindow {
		return nil
	}
	return r
}

// Send delivers m: a turn's progress updates the stream of the message
// it answers; the answer finishes that stream with its first piece and
// pushes the rest; an answer with no open stream (a scheduled message, a
// late one) is pushed whole. Files go after the text, each uploaded as
// the platform's temporary media and pushed (sendFile).
func (c *Channel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	content, files := c.env.Outgoing(m, MaxFileBytes)
	var notes []string
	files = slices.DeleteFunc(files, func(a channel.Attachment) bool {
		if len(a.Data) >= minFileBytes {
			return false
		}
		notes = append(notes, fmt.Sprintf("(%s not attached: %d bytes, and WeCom takes files of %d bytes or more)", a.Name, len(a.Data), minFileBytes))
		return true
	})
	content = strings.TrimSpace(strings.TrimSpace(content) + "\n\n" + strings.Join(notes, "\n"))
	if content == "" && len(files) == 0 {
		return "", nil
	}
	r := c.replyFor(m)
	if m.Kind == bus.Progress || m.Kind == bus.ToolHint {
		if r == nil {
			return "", nil // progress shows only in a stream
		}
		return r.stream, c.respond(ctx, m.ChatID, r, channel.SplitFenced(content, streamLimit)[0], false)
	}
	var pieces []string
	if content != "" {
		pieces = channel.SplitFenced(content, MaxMessageLength)
	}
	key := channel.TurnKey(m)
	var last string
	for i := c.turns.Sent(key, m.Kind); i < len(pieces)+len(files); i++ {
		var id string
		var err error
		switch {
		case i >= len(pieces):
			id, err = c.sendFile(ctx, m.ChatID, &files[i-len(pieces)])
		case i == 0 && r != nil:
			id, err = r.stream, c.respond(ctx, m.ChatID, r, pieces[0], true)
			if refused(err) {
				id, err = c.push(ctx, m.ChatID, pieces[0])
			}
		default:
			id, err = c.push(ctx, m.ChatID, pieces[i])
		}
		if err != nil {
			c.turns.SetSent(key, m.Kind, i)
			return last, err
		}
		last = id
	}
	c.turns.SetSent(key, m.Kind, 0)
	return last, nil
}

// Limits of the files the bot sends: the platform's largest (a file's
// 20 MB), its smallest, and the upload's chunks.
const (
	MaxFileBytes = 20 << 20
	minFileBytes = 5
	chunkBytes   = 512 << 10
)

// mediaType is the platform's type for a file: image (JPEG and PNG up to
// 10 MB), voice (AMR up to 2 MB), video (MP4 up to 10 MB), else file
// (anything up to 20 MB; a larger picture goes as a file too).
func mediaType(a *channel.Attachment) string {
	n := len(a.Data)
	switch strings.ToLower(filepath.Ext(a.Name)) {
	case ".jpg", ".jpeg", ".png":
		if n <= 10<<20 {
			return "image"
		}
	case ".amr":
		if n <= 2<<20 {
			return "voice"
		}
	case ".mp4":
		if n <= 10<<20 {
			return "video"
		}
	}
	return "file"
}

// sendFile uploads a as temporary media over the long connection (init,
// its 512 KiB chunks, finish: the platform checks the size and the MD5)
// and pushes it to the chat by its media_id.
func (c *Channel) sendFile(ctx context.Context, chatID string, a *channel.Attachment) (string, error) {
	typ := mediaType(a)
	chunks := (len(a.Data) + chunkBytes - 1) / chunkBytes
	sum := md5.Sum(a.Data)
	body, _ := json.Marshal(map[string]any{"type": typ, "filename": a.Name, "total_size": len(a.Data), "total_chunks": chunks, "md5": hex.EncodeToString(sum[:])})
	ans, err := c.call(ctx, chatID, Frame{Cmd: CmdUploadInit, Headers: FrameHeaders{ReqID: ReqID(CmdUploadInit)}, Body: body})
	if err != nil {
		return "", fmt.Errorf("sending %s: %w", a.Name, err)
	}
	var up struct {
		UploadID string `json:"upload_id"`
		MediaID  string `json:"media_id"`
	}
	if json.Unmarshal(ans.Body, &up) != nil || up.UploadID == "" {
		return "", fmt.Errorf("sending %s: wecom %s answered no upload_id", a.Name, CmdUploadInit)
	}
	for i := range chunks {
		part := a.Data[i*chunkBytes : min((i+1)*chunkBytes, len(a.Data))]
		body, _ := json.Marshal(map[string]any{"upload_id": up.UploadID, "chunk_index": i, "base64_data": base64.StdEncoding.EncodeToString(part)})
		if _, err := c.call(ctx, chatID, Frame{Cmd: CmdUploadChunk, Headers: FrameHeaders{ReqID: ReqID(CmdUploadChunk)}, Body: body}); err != nil {
			return "", fmt.Errorf("sending %s: %w", a.Name, err)
		}
	}
	body, _ = json.Marshal(map[string]string{"upload_id": up.UploadID})
	ans, err = c.call(ctx, chatID, Frame{Cmd: CmdUploadFinish, Headers: FrameHeaders{ReqID: ReqID(CmdUploadFinish)}, Body: body})
	if err != nil {
		return "", fmt.Errorf("sending %s: %w", a.Name, err)
	}
	if json.Unmarshal(ans.Body, &up) != nil || up.MediaID == "" {
		return "", fmt.Errorf("sending %s: wecom %s answered no media_id", a.Name, CmdUploadFinish)
	}
	body, _ = json.Marshal(map[string]any{"chatid": chatID, "msgtype": typ, typ: map[string]string{"media_id": up.MediaID}})
	f := Frame{Cmd: CmdSend, Headers: FrameHeaders{ReqID: ReqID(CmdSend)}, Body: body}
	if err := c.send(ctx, chatID, f); err != nil {
		return "", fmt.Errorf("sending %s: %w", a.Name, err)
	}
	return f.Headers.ReqID, nil
}

// Edit updates the stream of a turn's progress (id is the stream's).
func (c *Channel) Edit(ctx context.Context, chatID, id, content string) error {
	c.mu.Lock()
	r := c.streams[id]
	ok := r != nil && !r.finished && r.chat == chatID && time.Since(r.at) <= replyWindow
	c.mu.Unlock()
	if !ok {
		return errors.New("wecom: the progress stream is closed")
	}
	return c.respond(ctx, chatID, r, channel.SplitFenced(strings.TrimSpace(content), streamLimit)[0], false)
}

var (
	_ channel.Channel = (*Channel)(nil)
	_ channel.Editor  = (*Channel)(nil)
)
