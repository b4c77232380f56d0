package agentproto

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/coder/websocket"
)

// DefaultMaxFrame bounds one frame, either way: 1 MiB.
const DefaultMaxFrame = 1 << 20

// Client talks to one agent server: discovery over HTTP, runs over
// websockets. Its Token goes to that server only, never to another host
// (redirects are not followed).
type Client struct {
	// URL is the server's address: http(s)://host[:port][/prefix].
	URL string
	// Token, when set, is sent as Authorization: Bearer.
	Token string
	// HTTPClient makes the requests; nil is a client that does not
	// follow redirects.
	HTTPClient *http.Client
	// MaxFrame bounds a frame read from the server (default 16 MiB: a
	// server's frames carry tool outputs and results).
	MaxFrame int64
}

// NewClient returns a client for the server at base (http, https, ws or
// wss; a path is kept as the server's prefix).
func NewClient(base, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%q is not a server address: use http://host:port or https://host", base)
	}
	switch u.Scheme {
	case "http", "https":
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return nil, fmt.Errorf("%q is not a server address: the scheme must be http, https, ws or wss", base)
	}
	return &Client{URL: u.String(), Token: token}, nil
}

// ParseAgentURL splits the address of an agent into its server and its
// name. It takes a run address (ws[s]://host/agents/NAME/run), a
// discovery address (http[s]://host/agents/NAME), or a server address
// with the name appended (http[s]://host/NAME).
func ParseAgentURL(s string) (server, name string, err error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", "", fmt.Errorf("%q is not an agent address: use http://host:port/NAME or ws://host:port/agents/NAME/run", s)
	}
	p := strings.TrimSuffix(u.Path, "/")
	p = strings.TrimSuffix(p, "/run")
	i := strings.LastIndex(p, "/")
	if i < 0 || p[i+1:] == "" {
		return "", "", fmt.Errorf("%q names no agent: use http://host:port/NAME or ws://host:port/agents/NAME/run", s)
	}
	name, prefix := p[i+1:], p[:i]
	if un, err := url.PathUnescape(name); err == nil {
		name = un
	}
	prefix = strings.TrimSuffix(prefix, "/agents")
	u.Path, u.RawPath, u.RawQuery, u.Fragment = prefix, "", "", ""
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	case "http", "https":
	default:
		return "", "", fmt.Errorf("%q is not an agent address: the scheme must be http, https, ws or wss", s)
	}
	return u.String(), name, nil
}

// RunURL is the websocket address of an agent's runs.
func (c *Client) RunURL(name string) string {
	u, _ := url.Parse(c.URL)
	if u.Scheme == "https" {
		u.Scheme = "wss"
	} else {
		u.Scheme = "ws"
	}
	return u.String() + "/agents/" + url.PathEscape(name) + "/run"
}

func (c *Client) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return noRedirects
}

// noRedirects is the default HTTP client: a redirect would carry the
// token somewhere else.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// Agents lists the server's agents (GET /agents).
func (c *Client) Agents(ctx context.Context) ([]AgentRepr, error) {
	var out []AgentRepr
	return out, c.get(ctx, "/agents", &out)
}

// Agent describes one agent (GET /agents/{name}).
func (c *Client) Agent(ctx context.Context, name string) (*AgentRepr, error) {
	var out AgentRepr
	if err := c.get(ctx, "/agents/"+url.PathEscape(name), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tools lists the tools the server runs (GET /tools).
func (c *Client) Tools(ctx context.Context) ([]ToolRepr, error) {
	var out []ToolRepr
	return out, c.get(ctx, "/tools", &out)
}

// HTTPError is a discovery request the server refused.
type HTTPError struct {
	URL     string
	Status  int
	Message string
}

func (e *HTTPError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("%s: HTTP %d: %s", e.URL, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: HTTP %d", e.URL, e.Status)
}

func (c *Client) get(ctx context.Context, p string, out any) error {
	u := c.URL + p
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		msg := ""
		if json.Unmarshal(body, &e) == nil {
			msg = e.Error.Message
		}
		if msg == "" {
			msg = strings.TrimSpace(string(body))
			if len(msg) > 200 {
				msg = msg[:200] + "…"
			}
		}
		return &HTTPError{URL: u, Status: resp.StatusCode, Message: msg}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s: the answer is not what an agent server sends: %w", u, err)
	}
	return nil
}

// Start opens a run of the agent name and sends run (its type and seq
// are set here).
func (c *Client) Start(ctx context.Context, name string, run *Frame) (*Conn, error) {
	conn, err := c.Dial(ctx, c.RunURL(name))
	if err != nil {
		return nil, err
	}
	r := *run
	r.Type = TypeRun
	if err := conn.Send(ctx, &r); err != nil {
		conn.Abort()
		return nil, err
	}
	return conn, nil
}

// Dial opens the websocket at a run address of the client's server.
func (c *Client) Dial(ctx context.Context, runURL string) (*Conn, error) {
	h := http.Header{}
	if c.Token != "" {
		h.Set("Authorization", "Bearer "+c.Token)
	}
	ws, resp, err := websocket.Dial(ctx, runURL, &websocket.DialOptions{HTTPClient: c.httpClient(), HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, &HTTPError{URL: runURL, Status: resp.StatusCode, Message: "the server did not open a run"}
		}
		return nil, fmt.Errorf("%s: %w", runURL, err)
	}
	limit := c.MaxFrame
	if limit <= 0 {
		limit = 16 << 20
	}
	ws.SetReadLimit(limit)
	return &Conn{ws: ws}, nil
}

// Conn is one run's websocket, from the client's side. Send and the
// answers may be called from any goroutine; Read from one at a time.
type Conn struct {
	ws  *websocket.Conn
	mu  sync.Mutex
	seq int64
}

// Send writes f with the next seq.
func (c *Conn) Send(ctx context.Context, f *Frame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	f.Seq = c.seq
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return c.ws.Write(ctx, websocket.MessageText, data)
}

// Read returns the server's next frame. At the end of the connection it
// returns io.EOF when the server closed it normally.
func (c *Conn) Read(ctx context.Context) (*Frame, error) {
	_, data, err := c.ws.Read(ctx)
	if err != nil {
		if s := websocket.CloseStatus(err); s == websocket.StatusNormalClosure || s == websocket.StatusGoingAway {
			return nil, io.EOF
		}
		return nil, err
	}
	return Decode(data)
}

// ReadRaw returns the text of the server's next frame.
func (c *Conn) ReadRaw(ctx context.Context) ([]byte, error) {
	_, data, err := c.ws.Read(ctx)
	if err != nil {
		if s := websocket.CloseStatus(err); s == websocket.StatusNormalClosure || s == websocket.StatusGoingAway {
			return nil, io.EOF
		}
	}
	return data, err
}

// ToolResult answers the tool_call id.
func (c *Conn) ToolResult(ctx context.Context, id string, output any, isError bool) error {
	return c.Send(ctx, &Frame{Type: TypeToolResult, ID: id, Output: output, IsError: isError})
}

// Confirm answers the confirm id.
func (c *Conn) Confirm(ctx context.Context, id string, allow bool) error {
	return c.Send(ctx, &Frame{Type: TypeConfirmResult, ID: id, Allow: Bool(allow)})
}

// Input steers the run.
func (c *Conn) Input(ctx context.Context, content string) error {
	return c.Send(ctx, &Frame{Type: TypeInput, Content: content})
}

// Stop asks the server to end the run.
func (c *Conn) Stop(ctx context.Context) error {
	return c.Send(ctx, &Frame{Type: TypeStop})
}

// Close ends the connection normally.
func (c *Conn) Close() error {
	err := c.ws.Close(websocket.StatusNormalClosure, "")
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Abort drops the connection at once (the server cancels the run).
func (c *Conn) Abort() { c.ws.CloseNow() } //nolint:errcheck // nothing to do about it
