package matrix

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// client speaks the endpoints of the Matrix client-server API the channel
// uses (https://spec.matrix.org/v1.16/client-server-api/): whoami, sync,
// join, messages, joined_members, send, typing and upload. It does not
// retry: the channel retries, and honours 429s per room itself.
type client struct {
	base  *url.URL
	token string
	http  *http.Client
	// txnPrefix and txnSeq name transaction ids unique to this process.
	txnPrefix string
	txnSeq    atomic.Uint64
}

// maxResponseBytes bounds a JSON answer read (a first sync of a busy
// account is the largest).
const maxResponseBytes = 256 << 20

func newClient(base *url.URL, token string, hc *http.Client) *client {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &client{base: base, token: token, http: hc, txnPrefix: "nb" + hex.EncodeToString(b[:]) + "_"}
}

// apiError is a homeserver's answer other than 2xx: its standard error
// body ({"errcode":…,"error":…}, with retry_after_ms on
// M_LIMIT_EXCEEDED) when it sent one.
type apiError struct {
	Method, Path string
	Status       int
	Code         string
	Message      string
	// RetryAfterMS is the body's retry_after_ms (0 if absent).
	RetryAfterMS int64
	// RetryAfter is the Retry-After header.
	RetryAfter string
}

func (e *apiError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s %s: HTTP %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("%s %s: %s (HTTP %d): %s", e.Method, e.Path, e.Code, e.Status, e.Message)
}

// asAPIError is err's *apiError, if it is one.
func asAPIError(err error) *apiError {
	var e *apiError
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// endpoint is the URL of the path under the homeserver's base, each
// segment escaped (room ids hold '!' and ':', event ids may hold '/').
func (c *client) endpoint(query url.Values, segments ...string) *url.URL {
	u := *c.base
	var raw, plain strings.Builder
	raw.WriteString(strings.TrimRight(c.base.EscapedPath(), "/"))
	plain.WriteString(strings.TrimRight(c.base.Path, "/"))
	for _, s := range segments {
		raw.WriteString("/" + url.PathEscape(s))
		plain.WriteString("/" + s)
	}
	u.Path, u.RawPath = plain.String(), raw.String()
	if query != nil {
		u.RawQuery = query.Encode()
	}
	return &u
}

// do sends a request (body: JSON of in, or raw bytes of type ctype) and
// decodes a 2xx JSON answer into out.
func (c *client) do(ctx context.Context, method string, u *url.URL, in any, ctype string, out any) error {
	var body io.Reader
	switch b := in.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	default:
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ctype = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("User-Agent", "nb-gateway")
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, u.Path, err)
	}
	if len(data) > maxResponseBytes {
		return fmt.Errorf("%s %s: the answer is larger than %d MB", method, u.Path, maxResponseBytes>>20)
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{Method: method, Path: u.Path, Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
		var std struct {
			Code         string `json:"errcode"`
			Message      string `json:"error"`
			RetryAfterMS int64  `json:"retry_after_ms"`
		}
		if json.Unmarshal(data, &std) == nil {
			e.Code, e.Message, e.RetryAfterMS = std.Code, std.Message, std.RetryAfterMS
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the API's JSON: %w", method, u.Path, err)
	}
	return nil
}

func (c *client) v3(segments ...string) []string {
	return append([]string{"_matrix", "client", "v3"}, segments...)
}

// whoami is GET /account/whoami: the token's user.
func (c *client) whoami(ctx context.Context) (string, error) {
	var resp struct {
		UserID string `json:"user_id"`
	}
	if err := c.do(ctx, http.MethodGet, c.endpoint(nil, c.v3("account", "whoami")...), nil, "", &resp); err != nil {
		return "", err
	}
	if resp.UserID == "" {
		return "", errors.New("GET /account/whoami: the answer names no user_id")
	}
	return resp.UserID, nil
}

// sync is GET /sync: since empty for an initial sync, timeout the long
// poll's milliseconds, filter an inline filter.
func (c *client) sync(ctx context.Context, since string, timeout int, filter string) (*syncResponse, error) {
	q := url.Values{"timeout": {strconv.Itoa(timeout)}, "filter": {filter}}
	if since != "" {
		q.Set("since", since)
	}
	var resp syncResponse
	if err := c.do(ctx, http.MethodGet, c.endpoint(q, c.v3("sync")...), nil, "", &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// join is POST /rooms/{roomId}/join.
func (c *client) join(ctx context.Context, room string) error {
	return c.do(ctx, http.MethodPost, c.endpoint(nil, c.v3("rooms", room, "join")...), struct{}{}, "", nil)
}

// messages is GET /rooms/{roomId}/messages, backwards from from to to.
func (c *client) messages(ctx context.Context, room, from, to string, limit int) (*messagesResponse, error) {
	q := url.Values{"dir": {"b"}, "limit": {strconv.Itoa(limit)}}
	if from != "" {
		q.Set("from", from)
	}
	if to != "" {
		q.Set("to", to)
	}
	var resp messagesResponse
	if err := c.do(ctx, http.MethodGet, c.endpoint(q, c.v3("rooms", room, "messages")...), nil, "", &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// joinedMembers is GET /rooms/{roomId}/joined_members: how many.
func (c *client) joinedMembers(ctx context.Context, room string) (int, error) {
	var resp struct {
		Joined map[string]json.RawMessage `json:"joined"`
	}
	if err := c.do(ctx, http.MethodGet, c.endpoint(nil, c.v3("rooms", room, "joined_members")...), nil, "", &resp); err != nil {
		return 0, err
	}
	return len(resp.Joined), nil
}

// send is PUT /rooms/{roomId}/send/{eventType}/{txnId}: the event's id.
func (c *client) send(ctx context.Context, room, eventType, txn string, content any) (string, error) {
	var resp struct {
		EventID string `json:"event_id"`
	}
	if err := c.do(ctx, http.MethodPut, c.endpoint(nil, c.v3("rooms", room, "send", eventType, txn)...), content, "", &resp); err != nil {
		return "", err
	}
	if resp.EventID == "" {
		return "", errors.New("PUT /send: the answer names no event_id")
	}
	return resp.EventID, nil
}

// typing is PUT /rooms/{roomId}/typing/{userId}.
func (c *client) typing(ctx context.Context, room, user string, timeout time.Duration) error {
	body := struct {
		Typing  bool  `json:"typing"`
		Timeout int64 `json:"timeout,omitempty"`
	}{true, timeout.Milliseconds()}
	return c.do(ctx, http.MethodPut, c.endpoint(nil, c.v3("rooms", room, "typing", user)...), body, "", nil)
}

// upload is POST /_matrix/media/v3/upload: the file's mxc:// URI.
func (c *client) upload(ctx context.Context, data []byte, ctype, name string) (string, error) {
	var q url.Values
	if name != "" {
		q = url.Values{"filename": {name}}
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	var resp struct {
		ContentURI string `json:"content_uri"`
	}
	if err := c.do(ctx, http.MethodPost, c.endpoint(q, "_matrix", "media", "v3", "upload"), data, ctype, &resp); err != nil {
		return "", err
	}
	if !strings.HasPrefix(resp.ContentURI, "mxc://") {
		return "", fmt.Errorf("POST /upload: the answer's content_uri %q is not an mxc:// URI", resp.ContentURI)
	}
	return resp.ContentURI, nil
}

// txnID is a transaction id no other send of this process uses.
func (c *client) txnID() string {
	return c.txnPrefix + strconv.FormatUint(c.txnSeq.Add(1), 10) + "_" + strconv.FormatInt(time.Now().UnixMilli(), 36)
}
