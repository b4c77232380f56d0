package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nbots/nb/internal/retryafter"
)

// api is a client of the few Web API methods the channel calls
// (https://api.slack.com/web): auth.test, apps.connections.open,
// chat.postMessage, chat.update, files.getUploadURLExternal and
// files.completeUploadExternal. Each is a POST of a form
// (application/x-www-form-urlencoded) to base + method, the token in the
// Authorization header ("Bearer xoxb-…", or the app-level xapp- token for
// apps.connections.open), answered by a JSON object whose "ok" says
// whether it worked and whose "error" names what did not. It does not
// retry: the receive loop and the gateway's delivery do, a 429's wait
// given.
type api struct {
	base string // "https://slack.com/api/", with its final slash
	bot  string // the xoxb- token
	app  string // the xapp- token
	hc   *http.Client
}

// defaultAPIBase is Slack's Web API.
const defaultAPIBase = "https://slack.com/api/"

// maxAnswerBytes bounds a Web API answer read (the methods called answer
// a few KB).
const maxAnswerBytes = 4 << 20

// maxRetryAfter caps the wait a 429 asks for.
const maxRetryAfter = time.Hour

// apiError is a Web API answer with "ok": false: the method and Slack's
// error code ("channel_not_found", "invalid_auth", …).
type apiError struct {
	Method string
	Code   string
}

func (e *apiError) Error() string { return e.Method + ": " + e.Code }

// httpError is an answer with an HTTP status other than 200 and 429
// (Slack's 5xx while it is unwell): the method, the status, and the
// error code of the body if it had one.
type httpError struct {
	Method string
	Status int
	Code   string
}

func (e *httpError) Error() string {
	s := fmt.Sprintf("%s: HTTP %d %s", e.Method, e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	return s
}

// rateLimited is a 429: the method may be called again after After (its
// Retry-After header, a second if it gave none).
type rateLimited struct {
	Method string
	After  time.Duration
}

func (e *rateLimited) Error() string {
	return fmt.Sprintf("%s: rate limited (retry after %s)", e.Method, e.After)
}

// errorCode is Slack's error code in err ("" if err is not an answer of
// Slack's naming one).
func errorCode(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// call POSTs form to the method with token and decodes a successful
// answer into out (nil: only "ok" is read).
func (a *api) call(ctx context.Context, method, token string, form url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+method, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", method, redact(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", method, err)
	}
	var status struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	jerr := json.Unmarshal(b, &status)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return &rateLimited{Method: method, After: retryafter.Header(resp.Header.Get("Retry-After"), time.Now(), time.Second, maxRetryAfter)}
	case resp.StatusCode != http.StatusOK:
		return &httpError{Method: method, Status: resp.StatusCode, Code: status.Error}
	case jerr != nil:
		return fmt.Errorf("%s: the answer is not Slack's JSON: %w", method, jerr)
	case !status.OK:
		code := status.Error
		if code == "" {
			code = "unknown_error"
		}
		return &apiError{Method: method, Code: code}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: the answer is not the JSON expected: %w", method, err)
	}
	return nil
}

// redact is err without the URL a *url.Error names: the request's
// address is the configured apiBase, which the logs need not repeat.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// authTest is auth.test with the bot token: the bot's own user id.
func (a *api) authTest(ctx context.Context) (userID string, err error) {
	var out struct {
		UserID string `json:"user_id"`
	}
	if err := a.call(ctx, "auth.test", a.bot, url.Values{}, &out); err != nil {
		return "", err
	}
	if out.UserID == "" {
		return "", errors.New("auth.test: the answer names no user_id")
	}
	return out.UserID, nil
}

// connectionsOpen is apps.connections.open with the app-level token: the
// WebSocket URL of a new Socket Mode connection (good for one
// connection, so each reconnection asks again).
func (a *api) connectionsOpen(ctx context.Context) (string, error) {
	var out struct {
		URL string `json:"url"`
	}
	if err := a.call(ctx, "apps.connections.open", a.app, url.Values{}, &out); err != nil {
		return "", err
	}
	u, err := url.Parse(out.URL)
	if err != nil || (u.Scheme != "wss" && u.Scheme != "ws") || u.Host == "" {
		return "", errors.New("apps.connections.open: the answer's url is not a WebSocket URL")
	}
	return out.URL, nil
}

// postMessage is chat.postMessage of text (mrkdwn) in channel, in the
// thread of threadTS when it is not "": the new message's ts.
func (a *api) postMessage(ctx context.Context, channel, threadTS, text string) (string, error) {
	form := url.Values{"channel": {channel}, "text": {text}}
	if threadTS != "" {
		form.Set("thread_ts", threadTS)
	}
	var out struct {
		TS string `json:"ts"`
	}
	if err := a.call(ctx, "chat.postMessage", a.bot, form, &out); err != nil {
		return "", err
	}
	return out.TS, nil
}

// update is chat.update: the message ts of channel gets text.
func (a *api) update(ctx context.Context, channel, ts, text string) error {
	return a.call(ctx, "chat.update", a.bot, url.Values{"channel": {channel}, "ts": {ts}, "text": {text}}, nil)
}

// uploadFile shares a file in channel (and the thread of threadTS) the
// way Slack's external upload goes: files.getUploadURLExternal names an
// upload URL and a file id, the bytes are POSTed to that URL (raw, no
// token: the URL is the credential), and files.completeUploadExternal
// shares the file. It returns the file's id.
func (a *api) uploadFile(ctx context.Context, channel, threadTS, name string, data []byte) (string, error) {
	var u struct {
		UploadURL string `json:"upload_url"`
		FileID    string `json:"file_id"`
	}
	if err := a.call(ctx, "files.getUploadURLExternal", a.bot, url.Values{"filename": {name}, "length": {strconv.Itoa(len(data))}}, &u); err != nil {
		return "", err
	}
	if p, err := url.Parse(u.UploadURL); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || u.FileID == "" {
		return "", errors.New("files.getUploadURLExternal: the answer names no upload URL and file id")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.UploadURL, bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := a.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("uploading %s: %w", name, redact(err))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // only the status matters
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("uploading %s: HTTP %d %s", name, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	files, err := json.Marshal([]map[string]string{{"id": u.FileID, "title": name}})
	if err != nil {
		return "", err
	}
	form := url.Values{"files": {string(files)}, "channel_id": {channel}}
	if threadTS != "" {
		form.Set("thread_ts", threadTS)
	}
	var out struct {
		Files []struct {
			ID string `json:"id"`
		} `json:"files"`
	}
	if err := a.call(ctx, "files.completeUploadExternal", a.bot, form, &out); err != nil {
		return "", err
	}
	if len(out.Files) != 1 {
		return "", fmt.Errorf("files.completeUploadExternal: %d files shared, not 1", len(out.Files))
	}
	return out.Files[0].ID, nil
}
