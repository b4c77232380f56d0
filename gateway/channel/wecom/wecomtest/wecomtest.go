// Package wecomtest is WeCom's intelligent robot long connection for
// tests, written from the platform's documentation of the long
// connection (智能机器人长连接) and its SDKs' frames: JSON text frames
// {cmd, headers: {req_id}, body}; the bot subscribes (aibot_subscribe with
// bot_id and secret) and is answered {headers: {req_id}, errcode, errmsg};
// it pings (cmd ping) and is answered the same way; messages come as
// aibot_msg_callback and events as aibot_event_callback, once each, with
// no acknowledgement and no redelivery; the bot answers a message on its
// req_id with aibot_respond_msg (a stream: the same stream id updated,
// finish closing it), a welcome with aibot_respond_welcome_msg, and
// pushes with aibot_send_msg (Markdown, or a file, an image, a voice
// message or a video by its media_id, to a chatid). Files the bot sends
// are uploaded first as temporary media (上传临时素材), over the same
// connection: aibot_upload_media_init (type, filename, total_size,
// total_chunks, md5) answers an upload_id, aibot_upload_media_chunk
// carries each chunk (chunk_index from 0, base64_data of at most
// 512 KiB, 100 chunks at most), aibot_upload_media_finish checks the
// whole (its size, its md5, the type's limit: image 10 MB, voice 2 MB,
// video 10 MB, file 20 MB, 5 bytes at least) and answers its media_id.
// One connection per
// bot: a new subscription closes the old connection after a
// disconnected_event. Files people send are served encrypted
// (AES-256-CBC) at a URL with their aeskey.
package wecomtest

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/channel/channeltest"
)

// Commands, for Inject and Calls (TooMany answers errcode 45009,
// LoseAnswer carries the command out and answers nothing).
const (
	EPRespond = cmdRespond
	EPSend    = cmdSend
)

// The long connection's commands.
const (
	cmdSubscribe = "aibot_subscribe"
	cmdPing      = "ping"
	cmdCallback  = "aibot_msg_callback"
	cmdEvent     = "aibot_event_callback"
	cmdRespond   = "aibot_respond_msg"
	cmdWelcome   = "aibot_respond_welcome_msg"
	cmdSend      = "aibot_send_msg"
	cmdInit      = "aibot_upload_media_init"
	cmdChunk     = "aibot_upload_media_chunk"
	cmdFinish    = "aibot_upload_media_finish"
)

// Upload limits: a chunk's bytes, the chunks of one file, and each
// type's size.
const (
	ChunkBytes = 512 << 10
	MaxChunks  = 100
)

// MaxBytes is each media type's size limit.
var MaxBytes = map[string]int{"image": 10 << 20, "voice": 2 << 20, "video": 10 << 20, "file": 20 << 20}

// upload is a temporary media being uploaded.
type upload struct {
	typ, name, md5 string
	size, total    int
	chunks         map[int][]byte
}

// media is an uploaded temporary media.
type media struct {
	typ, name string
	data      []byte
}

// frame is one JSON message of the long connection.
type frame struct {
	Cmd     string `json:"cmd"`
	Headers struct {
		ReqID string `json:"req_id"`
	} `json:"headers"`
	Body json.RawMessage `json:"body"`
}

// encrypt encrypts a file as the platform does: AES-256-CBC, the key's
// first 16 bytes as the IV, PKCS#7 padding to 32 bytes.
func encrypt(plain, key []byte) []byte {
	pad := 32 - len(plain)%32
	body := append(append([]byte(nil), plain...), make([]byte, pad)...)
	for i := len(plain); i < len(body); i++ {
		body[i] = byte(pad)
	}
	block, _ := aes.NewCipher(key) // 32 bytes always make a cipher
	out := make([]byte, len(body))
	cipher.NewCBCEncrypter(block, key[:aes.BlockSize]).CryptBlocks(out, body)
	return out
}

// Stream is an answer on a message's req_id.
type Stream struct {
	ReqID, MsgID, ID, Content string
	Finished                  bool
	Updates                   int
}

// Push is a message the bot pushed: Markdown (Content), or a file of
// Type image, voice, video or file, with its name and bytes.
type Push struct {
	ChatID, Content string
	Type, Name      string
	Data            []byte
}

// Incoming is a message a person sends.
type Incoming struct {
	// Sender is their userid; Chat the group's chatid ("" for a direct
	// chat).
	Sender, Chat, Text string
	// Type is the msgtype (text when ""); Body replaces the body's
	// message part (e.g. {"image": {...}}).
	Type string
	Body map[string]any
}

// Server is the fake platform.
type Server struct {
	channeltest.Faults
	// URL is the long connection's ws:// address.
	URL           string
	BotID, Secret string

	hs *httptest.Server

	mu        sync.Mutex
	conn      *websocket.Conn
	connected int
	pings     int
	seq       int
	reqs      map[string]string // callback req_id → msgid
	streams   map[string]*Stream
	pushes    []Push
	welcomes  []string
	files     map[string][]byte
	uploads   map[string]*upload
	media     map[string]*media
	changed   chan struct{}
}

// New starts a fake for the bot's credentials.
func New(botID, secret string) *Server {
	s := &Server{BotID: botID, Secret: secret, reqs: map[string]string{}, streams: map[string]*Stream{}, files: map[string][]byte{},
		uploads: map[string]*upload{}, media: map[string]*media{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", s.socket)
	mux.HandleFunc("GET /files/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		b, ok := s.files[r.PathValue("id")]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b) //nolint:errcheck // the client sees a short file
	})
	s.hs = httptest.NewServer(mux)
	s.URL = "ws" + strings.TrimPrefix(s.hs.URL, "http")
	return s
}

// Close stops the server.
func (s *Server) Close() {
	s.Drop()
	s.hs.CloseClientConnections()
	s.hs.Close()
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // never fails
	return hex.EncodeToString(b)
}

func (s *Server) notify() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

func write(c *websocket.Conn, v any) error {
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Write(ctx, websocket.MessageText, b)
}

func answer(c *websocket.Conn, reqID string, code int, msg string) {
	write(c, map[string]any{"headers": map[string]string{"req_id": reqID}, "errcode": code, "errmsg": msg}) //nolint:errcheck // a lost connection
}

func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow() //nolint:errcheck // gone
	// An upload's chunk is 512 KiB in base64, with its frame.
	c.SetReadLimit(1 << 20)
	ctx := context.Background()
	subscribed := false
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			s.mu.Lock()
			if s.conn == c {
				s.conn = nil
			}
			s.mu.Unlock()
			return
		}
		var f frame
		if json.Unmarshal(data, &f) != nil || f.Headers.ReqID == "" {
			c.Close(websocket.StatusUnsupportedData, "not a frame") //nolint:errcheck // gone
			return
		}
		if !subscribed && f.Cmd != cmdSubscribe {
			answer(c, f.Headers.ReqID, 40001, "not subscribed")
			continue
		}
		switch f.Cmd {
		case cmdSubscribe:
			var b struct {
				BotID  string `json:"bot_id"`
				Secret string `json:"secret"`
			}
			json.Unmarshal(f.Body, &b) //nolint:errcheck // checked below
			if b.BotID != s.BotID || b.Secret != s.Secret {
				answer(c, f.Headers.ReqID, 40001, "invalid bot_id or secret")
				c.Close(websocket.StatusPolicyViolation, "auth failed") //nolint:errcheck // gone
				return
			}
			subscribed = true
			s.mu.Lock()
			old := s.conn
			s.conn = c
			s.connected++
			s.notify()
			s.mu.Unlock()
			if old != nil {
				write(old, map[string]any{"cmd": cmdEvent, "headers": map[string]string{"req_id": "ev_" + randHex(4)}, //nolint:errcheck // the old one goes anyway
					"body": map[string]any{"msgid": randHex(8), "msgtype": "event", "event": map[string]string{"eventtype": "disconnected_event"}}})
				old.CloseNow() //nolint:errcheck // replaced
			}
			answer(c, f.Headers.ReqID, 0, "ok")
		case cmdPing:
			s.mu.Lock()
			s.pings++
			s.mu.Unlock()
			answer(c, f.Headers.ReqID, 0, "ok")
		case cmdRespond:
			s.respond(c, f)
		case cmdSend:
			s.push(c, f)
		case cmdInit, cmdChunk, cmdFinish:
			s.upload(c, f)
		case cmdWelcome:
			var b struct {
				Text struct {
					Content string `json:"content"`
				} `json:"text"`
			}
			json.Unmarshal(f.Body, &b) //nolint:errcheck // a test reads it
			s.mu.Lock()
			s.welcomes = append(s.welcomes, b.Text.Content)
			s.notify()
			s.mu.Unlock()
			answer(c, f.Headers.ReqID, 0, "ok")
		default:
			answer(c, f.Headers.ReqID, 40008, "unknown cmd")
		}
	}
}

// fault answers an injected fault; it reports whether the command is
// to be carried out, and whether to answer.
func (s *Server) fault(c *websocket.Conn, f frame) (carry, reply bool) {
	switch s.Next(f.Cmd) {
	case channeltest.TooMany:
		answer(c, f.Headers.ReqID, 45009, "api freq out of limit")
		return false, false
	case channeltest.LoseAnswer:
		return true, false
	case channeltest.Reset:
		c.CloseNow() //nolint:errcheck // the fault
		return false, false
	}
	return true, true
}

func (s *Server) respond(c *websocket.Conn, f frame) {
	var b struct {
		MsgType string `json:"msgtype"`
		Stream  struct {
			ID      string `json:"id"`
			Finish  bool   `json:"finish"`
			Content string `json:"content"`
		} `json:"stream"`
	}
	json.Unmarshal(f.Body, &b) //nolint:errcheck // checked below
	s.mu.Lock()
	msg, ok := s.reqs[f.Headers.ReqID]
	st := s.streams[f.Headers.ReqID]
	s.mu.Unlock()
	switch {
	case !ok:
		answer(c, f.Headers.ReqID, 40008, "invalid req_id")
		return
	case b.MsgType != "stream" || b.Stream.ID == "" || len(b.Stream.Content) > 20480:
		answer(c, f.Headers.ReqID, 40008, "invalid stream")
		return
	case st != nil && (st.ID != b.Stream.ID || st.Finished && st.Content != b.Stream.Content):
		answer(c, f.Headers.ReqID, 40008, "stream finished or another stream")
		return
	}
	carry, reply := s.fault(c, f)
	if carry {
		s.mu.Lock()
		if st == nil {
			st = &Stream{ReqID: f.Headers.ReqID, MsgID: msg, ID: b.Stream.ID}
			s.streams[f.Headers.ReqID] = st
		}
		st.Content, st.Finished = b.Stream.Content, st.Finished || b.Stream.Finish
		st.Updates++
		s.notify()
		s.mu.Unlock()
	}
	if reply {
		answer(c, f.Headers.ReqID, 0, "ok")
	}
}

func (s *Server) push(c *websocket.Conn, f frame) {
	var b struct {
		ChatID   string `json:"chatid"`
		MsgType  string `json:"msgtype"`
		Markdown struct {
			Content string `json:"content"`
		} `json:"markdown"`
	}
	var raw map[string]json.RawMessage
	json.Unmarshal(f.Body, &b)   //nolint:errcheck // checked below
	json.Unmarshal(f.Body, &raw) //nolint:errcheck // checked below
	p := Push{ChatID: b.ChatID, Type: b.MsgType}
	switch b.MsgType {
	case "markdown":
		p.Content = b.Markdown.Content
		if len(p.Content) > 4096 {
			answer(c, f.Headers.ReqID, 40008, "invalid message")
			return
		}
	case "file", "image", "voice", "video":
		var m struct {
			MediaID string `json:"media_id"`
		}
		json.Unmarshal(raw[b.MsgType], &m) //nolint:errcheck // checked below
		s.mu.Lock()
		md := s.media[m.MediaID]
		s.mu.Unlock()
		if md == nil {
			answer(c, f.Headers.ReqID, 40007, "invalid media_id")
			return
		}
		if md.typ != b.MsgType {
			answer(c, f.Headers.ReqID, 40008, "media type does not match msgtype")
			return
		}
		p.Name, p.Data = md.name, md.data
	default:
		answer(c, f.Headers.ReqID, 40008, "invalid message")
		return
	}
	if b.ChatID == "" {
		answer(c, f.Headers.ReqID, 40008, "invalid message")
		return
	}
	carry, reply := s.fault(c, f)
	if carry {
		s.mu.Lock()
		s.pushes = append(s.pushes, p)
		s.notify()
		s.mu.Unlock()
	}
	if reply {
		answer(c, f.Headers.ReqID, 0, "ok")
	}
}

// upload carries out the three commands of a temporary media's upload.
func (s *Server) upload(c *websocket.Conn, f frame) {
	var b struct {
		Type        string `json:"type"`
		Filename    string `json:"filename"`
		TotalSize   int    `json:"total_size"`
		TotalChunks int    `json:"total_chunks"`
		MD5         string `json:"md5"`
		UploadID    string `json:"upload_id"`
		ChunkIndex  *int   `json:"chunk_index"`
		Base64Data  string `json:"base64_data"`
	}
	json.Unmarshal(f.Body, &b) //nolint:errcheck // checked below
	carry, reply := s.fault(c, f)
	if !carry {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fail := func(code int, msg string) {
		if reply {
			answer(c, f.Headers.ReqID, code, msg)
		}
	}
	body := map[string]any{}
	switch f.Cmd {
	case cmdInit:
		if _, ok := MaxBytes[b.Type]; !ok || b.Filename == "" || b.MD5 == "" {
			fail(40058, "invalid type, filename or md5")
			return
		}
		if b.TotalSize < 5 || b.TotalChunks < 1 || b.TotalChunks > MaxChunks || b.TotalChunks != (b.TotalSize+ChunkBytes-1)/ChunkBytes {
			fail(40006, "invalid total_size or total_chunks")
			return
		}
		id := "up_" + randHex(8)
		s.uploads[id] = &upload{typ: b.Type, name: b.Filename, md5: b.MD5, size: b.TotalSize, total: b.TotalChunks, chunks: map[int][]byte{}}
		body["upload_id"] = id
	case cmdChunk:
		u := s.uploads[b.UploadID]
		data, err := base64.StdEncoding.DecodeString(b.Base64Data)
		switch {
		case u == nil:
			fail(40058, "invalid upload_id")
			return
		case b.ChunkIndex == nil || *b.ChunkIndex < 0 || *b.ChunkIndex >= u.total:
			fail(40058, "invalid chunk_index")
			return
		case err != nil || len(data) == 0 || len(data) > ChunkBytes:
			fail(40058, "invalid base64_data")
			return
		}
		u.chunks[*b.ChunkIndex] = data
	case cmdFinish:
		u := s.uploads[b.UploadID]
		if u == nil {
			fail(40058, "invalid upload_id")
			return
		}
		var data []byte
		for i := range u.total {
			data = append(data, u.chunks[i]...)
		}
		sum := md5.Sum(data)
		switch {
		case len(u.chunks) != u.total || len(data) != u.size:
			fail(40058, "chunks missing")
			return
		case hex.EncodeToString(sum[:]) != u.md5:
			fail(40058, "md5 mismatch")
			return
		case len(data) > MaxBytes[u.typ]:
			fail(40006, "invalid file size")
			return
		}
		delete(s.uploads, b.UploadID)
		id := "media_" + randHex(8)
		s.media[id] = &media{typ: u.typ, name: u.name, data: data}
		body["type"], body["media_id"], body["created_at"] = u.typ, id, fmt.Sprint(time.Now().Unix())
	}
	if reply {
		write(c, map[string]any{"headers": map[string]string{"req_id": f.Headers.ReqID}, "errcode": 0, "errmsg": "ok", "body": body}) //nolint:errcheck // a lost connection
	}
}

// Post sends a person's message on the current connection (lost when
// there is none, as on the platform) and returns its msgid and req_id.
func (s *Server) Post(in Incoming) (msgID, reqID string) {
	s.mu.Lock()
	s.seq++
	msgID = fmt.Sprintf("msg%06d", s.seq)
	reqID = "cb_" + randHex(8)
	s.reqs[reqID] = msgID
	c := s.conn
	s.mu.Unlock()
	typ := in.Type
	if typ == "" {
		typ = "text"
	}
	body := map[string]any{"msgid": msgID, "aibotid": s.BotID, "chattype": "single", "from": map[string]string{"userid": in.Sender}, "msgtype": typ}
	if in.Chat != "" {
		body["chatid"], body["chattype"] = in.Chat, "group"
	}
	if in.Body != nil {
		for k, v := range in.Body {
			body[k] = v
		}
	} else {
		body["text"] = map[string]string{"content": in.Text}
	}
	if c != nil {
		write(c, map[string]any{"cmd": cmdCallback, "headers": map[string]string{"req_id": reqID}, "body": body}) //nolint:errcheck // lost, as on the platform
	}
	return msgID, reqID
}

// EnterChat sends the enter_chat event of a person opening the chat.
func (s *Server) EnterChat(user string) {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		write(c, map[string]any{"cmd": cmdEvent, "headers": map[string]string{"req_id": "ev_" + randHex(8)}, //nolint:errcheck // a test waits for the welcome
			"body": map[string]any{"msgid": randHex(8), "msgtype": "event", "from": map[string]string{"userid": user}, "event": map[string]string{"eventtype": "enter_chat"}}})
	}
}

// AddFile stores data encrypted with a fresh aeskey and returns the
// media object a message carries ({url, aeskey}).
func (s *Server) AddFile(data []byte) map[string]string {
	key := make([]byte, 32)
	rand.Read(key) //nolint:errcheck // never fails
	id := randHex(8)
	s.mu.Lock()
	s.files[id] = encrypt(data, key)
	s.mu.Unlock()
	return map[string]string{"url": "http" + strings.TrimPrefix(s.URL, "ws") + "/files/" + id, "aeskey": strings.TrimRight(base64.StdEncoding.EncodeToString(key), "=")}
}

// Drop closes the connection without a goodbye.
func (s *Server) Drop() {
	s.mu.Lock()
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	if c != nil {
		c.CloseNow() //nolint:errcheck // dropped on purpose
	}
}

// Connections is how many subscriptions succeeded.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected
}

// Pings is how many pings the bot sent.
func (s *Server) Pings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pings
}

// Stream is the answer on the message's req_id (nil for none).
func (s *Server) Stream(reqID string) *Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.streams[reqID]; st != nil {
		c := *st
		return &c
	}
	return nil
}

// Pushes are the messages pushed to chatID ("" for all).
func (s *Server) Pushes(chatID string) []Push {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Push
	for _, p := range s.pushes {
		if chatID == "" || p.ChatID == chatID {
			out = append(out, p)
		}
	}
	return out
}

// Welcomes are the welcome messages sent.
func (s *Server) Welcomes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.welcomes...)
}

// Wait waits until cond holds or ctx ends.
func (s *Server) Wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
