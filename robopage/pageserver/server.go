// Package pageserver serves a robopage library over the HTTP API of the
// robopages function-calling server: GET / and GET /{filter} list the
// tools in the openai, rigging or nerve flavor, POST /process runs a batch
// of calls. Handlers stay thin; robopage does the work.
package pageserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/connlimit"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/internal/httpjson"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/robopage"
)

// MaxBody is the largest POST /process body accepted, as the reference.
const MaxBody = 2 << 20

// Server is the HTTP API over a library.
type Server struct {
	// Library holds the pages served.
	Library *robopage.Library
	// Executor runs the calls; nil is a new Executor with default limits.
	Executor *robopage.Executor
	// Token, when not empty, is required as "Authorization: Bearer <token>"
	// on every request.
	Token string
	// Log receives one line per call; nil is slog.Default().
	Log *slog.Logger
	// Metrics serves GET /metrics (package internal/metric) behind the
	// token, as the other routes (a page category named metrics is then
	// listed under GET /metrics/ only).
	Metrics bool

	once       sync.Once
	authorized func(*http.Request) bool // Token's check (httpguard.Bearer)
	mux        *http.ServeMux
	counted    http.Handler
}

func (s *Server) init() {
	s.once.Do(func() {
		s.authorized = httpguard.Bearer(s.Token)
		if s.Executor == nil {
			s.Executor = &robopage.Executor{}
		}
		if s.Log == nil {
			s.Log = slog.Default()
		}
		s.mux = s.routes()
		s.counted = metric.Middleware(metric.Robopages, http.HandlerFunc(s.serve))
	})
}

// ServeHTTP routes a request as the reference does, counting it in the
// metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.init()
	s.counted.ServeHTTP(w, r)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// The token is checked before anything else, the body above all:
	// a client without it gets its 401 at once, however slowly it sends.
	if s.Token != "" && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="robopages"`)
		reject(w, r, http.StatusUnauthorized, "missing or wrong bearer token: send Authorization: Bearer <token>")
		return
	}
	// The reference allows no CORS origin: browsers are refused.
	if r.Header.Get("Origin") != "" {
		reject(w, r, http.StatusBadRequest, "Origin is not allowed to make this request")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// routes are the API's, as net/http patterns: POST /process, GET / and
// GET /{filter...}; any other method is 405 with an empty body, as the
// reference answers.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /process", s.process)
	if s.Metrics {
		mux.Handle("GET /metrics", metric.Handler())
	}
	mux.HandleFunc("GET /{filter...}", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet { // the GET pattern takes HEAD too
			notAllowed(w, r)
			return
		}
		s.list(w, r, r.PathValue("filter"))
	})
	mux.HandleFunc("/", notAllowed)
	return mux
}

// notAllowed answers a method the path does not take.
func notAllowed(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/") {
		plain(w, http.StatusNotFound, "nope")
		return
	}
	w.Header().Set("Allow", "GET")
	if r.URL.Path == "/process" {
		w.Header().Set("Allow", "GET, POST")
	}
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(http.StatusMethodNotAllowed)
}

// list serves GET / and GET /{filter}. Unlike the reference, a filter may
// have several segments (/cybersecurity/reverse-engineering), as nerve's
// documentation uses it.
func (s *Server) list(w http.ResponseWriter, r *http.Request, filter string) {
	flavor := robopage.OpenAI
	if v, ok := r.URL.Query()["flavor"]; ok {
		f, err := robopage.ParseFlavor(v[0])
		if err != nil {
			plain(w, http.StatusBadRequest, err.Error())
			return
		}
		flavor = f
	}
	httpjson.Write(w, http.StatusOK, s.Library.List(flavor, filter))
}

// Call is one element of a POST /process request.
type Call struct {
	// ID is echoed back as call_id; nil when absent or null.
	ID *string
	// Type is "function" when absent; not checked.
	Type string
	// Name is the function called.
	Name string
	// Arguments are the arguments as text.
	Arguments map[string]string
}

// Result is one element of a POST /process answer.
type Result struct {
	// Role is always "tool".
	Role string `json:"role"`
	// CallID echoes the call's id; null when it had none.
	CallID *string `json:"call_id"`
	// Content is the command's result text.
	Content string `json:"content"`
}

// DecodeCalls reads a POST /process body: a JSON array of
// {id, type, function: {name, arguments}}. Beyond the reference,
// arguments may be OpenAI's JSON text, and numbers and booleans are
// accepted as their text.
func DecodeCalls(body []byte) ([]Call, error) {
	var raw []struct {
		ID       json.RawMessage `json:"id"`
		Type     *string         `json:"type"`
		Function *struct {
			Name      *string         `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("Json deserialize error: %s", jsonMessage(err))
	}
	calls := make([]Call, 0, len(raw))
	for i, rc := range raw {
		c := Call{Type: "function"}
		at := fmt.Sprintf("call %d", i+1)
		if rc.Type != nil {
			c.Type = *rc.Type
		}
		if id, ok, err := idText(rc.ID); err != nil {
			return nil, fmt.Errorf("Json deserialize error: %s: id must be text or null", at)
		} else if ok {
			c.ID = &id
		}
		if rc.Function == nil {
			return nil, fmt.Errorf("Json deserialize error: %s: missing field `function`", at)
		}
		if rc.Function.Name == nil {
			return nil, fmt.Errorf("Json deserialize error: %s: missing field `name`", at)
		}
		c.Name = *rc.Function.Name
		args, err := decodeArguments(rc.Function.Arguments)
		if err != nil {
			return nil, fmt.Errorf("Json deserialize error: %s: %v", at, err)
		}
		c.Arguments = args
		calls = append(calls, c)
	}
	return calls, nil
}

func idText(raw json.RawMessage) (string, bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	var v any
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return "", false, err
	}
	switch v := v.(type) {
	case string:
		return v, true, nil
	case json.Number:
		return v.String(), true, nil
	}
	return "", false, errors.New("not text")
}

func decodeArguments(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, errors.New("missing field `arguments`")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		// OpenAI sends the arguments as JSON text.
		if strings.TrimSpace(text) == "" {
			text = "{}"
		}
		raw = json.RawMessage(text)
	}
	var obj map[string]any
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	if err := d.Decode(&obj); err != nil || obj == nil {
		return nil, errors.New("arguments must be a JSON object of argument name to value")
	}
	return robopage.StringArgs(obj)
}

func jsonMessage(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%s must be %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return fmt.Sprintf("the body must be a JSON array of calls, not %s", te.Value)
	}
	return err.Error()
}

func jsonKind(k string) string {
	switch k {
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "ptr":
		return "text"
	}
	return k
}

// process serves POST /process: every call is checked before any runs
// (the reference runs the others even when one is bad), then all run
// concurrently within the executor's bound and the answers come back in
// request order. Any failure makes the whole answer a 400 with the first
// failure in request order, as the reference.
func (s *Server) process(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		reject(w, r, http.StatusBadRequest, "Content type error: send the calls with Content-Type: application/json")
		return
	}
	if r.ContentLength > MaxBody {
		reject(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("JSON payload (%d bytes) is larger than allowed (limit: %d bytes).", r.ContentLength, MaxBody))
		return
	}
	// Serve's ReadTimeout bounds the time the body takes to arrive.
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			reject(w, r, http.StatusRequestTimeout, "the request did not arrive within the server's read timeout: send it faster")
			return
		}
		reject(w, r, http.StatusBadRequest, "cannot read the request: "+err.Error())
		return
	}
	if len(body) > MaxBody {
		reject(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("JSON payload is larger than allowed (limit: %d bytes).", MaxBody))
		return
	}
	calls, err := DecodeCalls(body)
	if err != nil {
		plain(w, http.StatusBadRequest, err.Error())
		return
	}
	results, err := s.Run(r.Context(), calls)
	if err != nil {
		plain(w, http.StatusBadRequest, "error executing call: "+err.Error())
		return
	}
	httpjson.Write(w, http.StatusOK, results)
}

// Run checks and runs a batch of calls and returns their results in order;
// the error is the first failing call's, in order.
func (s *Server) Run(ctx context.Context, calls []Call) ([]Result, error) {
	s.init()
	plans := make([]*robopage.Plan, len(calls))
	for i, c := range calls {
		f, ok := s.Library.Function(c.Name)
		if !ok {
			return nil, fmt.Errorf("function %s not found", c.Name)
		}
		p, err := s.Executor.Prepare(f, c.Arguments)
		if err != nil {
			return nil, err
		}
		plans[i] = p
	}
	results := make([]Result, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			out, err := s.Executor.Run(ctx, plans[i])
			s.Log.Info("robopage call", "function", calls[i].Name, "container", plans[i].Container, "duration", time.Since(start).Round(time.Millisecond), "bytes", len(out), "error", err)
			results[i] = Result{Role: "tool", CallID: calls[i].ID, Content: out}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// reject answers a request whose body is not read: the connection is
// closed after the answer, so the server does not wait for (and read)
// the rest of a body it does not want.
func reject(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if r.ContentLength == 0 {
		plain(w, code, msg)
		return
	}
	w.Header().Set("Connection", "close")
	plain(w, code, msg)
	// net/http drains up to 256 KB of an unread body after the handler,
	// even on a connection it then closes: an immediate read deadline
	// ends that at once (the answer is written first).
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

func plain(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
	w.WriteHeader(code)
	io.WriteString(w, msg)
}

// CheckAddress refuses an address that other machines can reach unless
// allowRemote is set and a token protects the server: the API runs
// programs on this machine. Its refusal is an *AddressError, which a
// front-end words with its own flags.
func CheckAddress(addr string, allowRemote bool, token string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("address %s: %v; write host:port, for example 127.0.0.1:8000", addr, err)
	}
	if httpguard.IsLoopbackListen(addr) {
		return nil
	}
	if !allowRemote {
		return &AddressError{Addr: addr}
	}
	if token == "" {
		return &AddressError{Addr: addr, NeedsToken: true}
	}
	return nil
}

// AddressError is CheckAddress's refusal of an address other machines
// can reach: not allowed at all, or allowed (NeedsToken) but without a
// token to protect the server.
type AddressError struct {
	Addr       string
	NeedsToken bool
}

func (e *AddressError) Error() string {
	if e.NeedsToken {
		return fmt.Sprintf("listening on %s needs a token: without one anybody who reaches it can run programs here", e.Addr)
	}
	return fmt.Sprintf("refusing to listen on %s: other machines could run programs here; use a loopback address (127.0.0.1:8000)", e.Addr)
}

// Limits bound what clients can hold of a server: slow requests are cut
// off, and one address cannot take every connection.
type Limits struct {
	// HeaderTimeout bounds reading a request's headers; 0 is 10s.
	HeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body; 0 is
	// 30s (2 MB at 70 KB/s). A body still arriving then gets 408.
	ReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle that long; 0 is 2m.
	IdleTimeout time.Duration
	// MaxClientConns bounds the open connections of one client address;
	// 0 is DefaultMaxClientConns. Connections beyond it get 429 and are
	// closed at once.
	MaxClientConns int
	// MaxConns bounds the open connections in all; 0 is DefaultMaxConns.
	// Beyond it new connections wait to be accepted.
	MaxConns int
	// ConnsAdvice says how a refused client may get more connections,
	// in the words of the command that runs the server; empty: nothing.
	ConnsAdvice string
}

// Defaults of Limits.
const (
	DefaultMaxClientConns = 64
	DefaultMaxConns       = 1024
)

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.HeaderTimeout, 10*time.Second)
	def(&l.ReadTimeout, 30*time.Second)
	def(&l.IdleTimeout, 2*time.Minute)
	if l.MaxClientConns <= 0 {
		l.MaxClientConns = DefaultMaxClientConns
	}
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	return l
}

// Serve answers requests on ln within lim until ctx is done, then shuts
// down, letting calls in progress finish for up to 5 seconds. A call runs
// as long as its executor allows: no write timeout cuts its answer.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, lim Limits) error {
	lim = lim.withDefaults()
	ln = connlimit.New(lim.MaxClientConns, lim.MaxConns, nil, lim.ConnsAdvice).Listen(ln)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: lim.HeaderTimeout, ReadTimeout: lim.ReadTimeout, IdleTimeout: lim.IdleTimeout}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
		<-errc
		return nil
	}
}
