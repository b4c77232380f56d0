// Package mcpserver offers nb's bots to MCP clients (Claude Desktop,
// Cursor, the MCP Inspector...): each cartridge is a tool that takes a
// message (and optionally a state key) and answers with the bot's
// answer, its own tools running inside; each robopage function is a tool
// of its own. It serves over stdio or streamable HTTP, sends progress
// notifications while a bot answers, asks the client (MCP elicitation)
// before a tool that needs confirmation runs, and stops a call the
// client cancels.
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/catalog"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/robopage"
	"github.com/nbots/nb/tool"
)

// Config says what to serve.
type Config struct {
	// Host is what the bots are built with.
	Host bot.Host
	// Paths are cartridge files, robopage files, and folders holding
	// either (not searched below their first level). Empty serves the
	// cartridges of the host's cartridge folders.
	Paths []string
	// AllowTools runs the tools that need confirmation without asking
	// when the client cannot be asked (it has no elicitation); otherwise
	// such calls are denied with the specification's denial text.
	AllowTools bool
	// AllowTool names tools whose calls run without asking when the
	// client cannot be asked, as AllowTools does for all (nb mcp serve
	// --allow-tool).
	AllowTool []string
	// Output receives what the cartridges' scripts print; nil discards
	// it. In stdio mode it must not be the protocol's output.
	Output io.Writer
	// Version is nb's version, given to clients.
	Version string
	// AllowOrigins are the origins of the browser pages the HTTP handler
	// answers ("*" is any); none by default (see Handler).
	AllowOrigins []string
	// OriginAdvice says how to allow a refused origin (%s is the
	// origin), in the words of the command that runs the server; empty:
	// a neutral text.
	OriginAdvice string
}

// Server is nb's bots as an MCP server.
type Server struct {
	cfg   Config
	life  context.Context // the bots' exchanges run in it
	runs  runs
	mcp   *sdk.Server
	bots  []*bot.Bot
	names []string // the tools' names, in order
}

// New loads the cartridges and robopages of cfg.Paths and builds their
// bots (which start their own MCP servers; they run until Close or until
// ctx ends). A path that cannot be loaded is an error; a folder without
// any cartridge or page is one too.
func New(ctx context.Context, cfg Config) (*Server, error) {
	s := &Server{cfg: cfg, life: ctx}
	s.mcp = sdk.NewServer(&sdk.Implementation{Name: "nb", Title: "Nano Bots", Version: cfg.Version}, &sdk.ServerOptions{
		Instructions: "Each tool is a bot (a Nano Bots cartridge) or a robopage function. Send a bot a message; give a state key to continue a conversation across calls.",
	})
	carts, pages, err := s.discover()
	if err != nil {
		return nil, err
	}
	taken := map[string]bool{}
	unique := func(name string) string {
		name = tool.ProviderName(name)
		out := name
		for n := 2; taken[tool.MatchName(out)]; n++ {
			out = fmt.Sprintf("%s_%d", name, n)
		}
		taken[tool.MatchName(out)] = true
		return out
	}
	for _, path := range carts {
		c, b, err := catalog.Open(ctx, path, cfg.Host, cartridge.Eval)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.bots = append(s.bots, b)
		name := unique(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)))
		s.mcp.AddTool(&sdk.Tool{Name: name, Title: c.Meta().Name, Description: describe(c), InputSchema: askSchema(), Annotations: &sdk.ToolAnnotations{OpenWorldHint: ptr(true)}}, s.ask(b))
		s.names = append(s.names, name)
	}
	ex := cfg.Host.Robopages
	if ex == nil {
		ex = robopage.NewExecutor(cfg.Host.Environ)
	}
	for _, path := range pages {
		tools, problems, err := robopage.LoadTools(ctx, path, "", ex)
		if err != nil {
			s.Close()
			return nil, err
		}
		for _, p := range problems {
			warn(cfg.Host, fmt.Sprintf("robopage: %v", p))
		}
		for _, t := range tools {
			spec := t.Spec()
			name := unique(spec.Name)
			s.mcp.AddTool(&sdk.Tool{Name: name, Description: spec.Description, InputSchema: spec.Parameters}, s.run(t))
			s.names = append(s.names, name)
		}
	}
	if len(s.names) == 0 {
		s.Close()
		return nil, errors.New("nothing to serve: no cartridge or robopage found")
	}
	return s, nil
}

func ptr[T any](v T) *T { return &v }

func warn(h bot.Host, msg string) {
	if h.Warn != nil {
		h.Warn(msg)
	}
}

// Tools lists the names of the tools served, in order.
func (s *Server) Tools() []string { return append([]string(nil), s.names...) }

// Close stops the bots (and the MCP servers they started).
func (s *Server) Close() error {
	var errs []error
	for _, b := range s.bots {
		errs = append(errs, b.Close())
	}
	s.bots = nil
	return errors.Join(errs...)
}

// ServeStdio serves one client on r and w (the process's standard input
// and output) until it disconnects or ctx ends.
func (s *Server) ServeStdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	err := s.mcp.Run(ctx, &sdk.IOTransport{Reader: r, Writer: w})
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Handler serves MCP over streamable HTTP at any path it is mounted on.
// With a token, every request must carry Authorization: Bearer <token>
// (compared in constant time); without, it must come from a loopback
// address the caller chose to listen on. Either way, as the MCP
// specification requires, a request with an Origin header is answered
// only from Config.AllowOrigins, and one that reaches a loopback
// listener only when it names a loopback host (nb serve's check,
// httpguard.BrowserGuard): a web page must not reach the bots.
func (s *Server) Handler(token string) http.Handler {
	guard := httpguard.BrowserGuard{Origins: s.cfg.AllowOrigins, Why: "nb mcp serve answers",
		Fix: s.cfg.OriginAdvice, HostFix: "listen on another address to serve other names"}
	if guard.Fix == "" {
		guard.Fix = "its operator may allow %s"
	}
	return guard.Handler(s.authorized(token, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.mcp }, nil)))
}

// authorized passes to h the requests that carry the token, when there
// is one.
func (s *Server) authorized(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	allows := httpguard.Bearer(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allows(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="nb"`)
			http.Error(w, "missing or wrong bearer token: send Authorization: Bearer <NB_SERVE_TOKEN>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// discover sorts the paths into cartridges and robopages.
func (s *Server) discover() (carts, pages []string, err error) {
	paths := s.cfg.Paths
	implicit := len(paths) == 0
	if implicit {
		paths = s.cfg.Host.CartridgeEnv().Directories()
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			if implicit {
				continue
			}
			// A cartridge may be named as nb finds it (a name without
			// its extension, a name in the cartridge folders).
			carts = append(carts, p)
			continue
		}
		if !fi.IsDir() {
			if isPage(p) {
				pages = append(pages, p)
			} else {
				carts = append(carts, p)
			}
			continue
		}
		if _, err := os.ReadDir(p); err != nil {
			return nil, nil, fmt.Errorf("%s: %v", p, err)
		}
		files := catalog.Find(p, 1)
		// In the order of the folder's listing, as the tools are named.
		sort.SliceStable(files, func(i, j int) bool { return filepath.Base(files[i].Path) < filepath.Base(files[j].Path) })
		found := false
		for _, f := range files {
			if f.Err != nil {
				return nil, nil, f.Err
			}
			if isPage(f.Path) {
				pages = append(pages, f.Path)
			} else {
				carts = append(carts, f.Path)
			}
			found = true
		}
		if !found && !implicit {
			return nil, nil, fmt.Errorf("%s: no cartridge (.yml, .yaml, .md) or robopage in this folder", p)
		}
	}
	sort.Strings(pages)
	return carts, pages, nil
}

// isPage tells a robopage (a YAML file with functions) from a cartridge.
func isPage(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".yml" && ext != ".yaml" {
		return false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var top map[string]any
	if yaml.Unmarshal(data, &top) != nil {
		return false
	}
	_, functions := top["functions"]
	_, provider := top["provider"]
	return functions && !provider
}

func describe(c *cartridge.Cartridge) string {
	m := c.Meta()
	name := m.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(c.Path), filepath.Ext(c.Path))
	}
	d := fmt.Sprintf("Ask the %s bot (a Nano Bots cartridge) and get its answer.", name)
	if m.Description != "" {
		d += " " + m.Description
	}
	return d
}

// askSchema is the input of a cartridge's tool.
func askSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"message": map[string]any{"type": "string", "description": "The message to send to the bot."},
			"state":   map[string]any{"type": "string", "description": "A state key: calls with the same key continue one conversation, kept by nb. Without it, each call is a new conversation."},
		},
		"required": []any{"message"},
	}
}

func textResult(text string, isError bool) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, IsError: isError}
}

// ask is the handler of a cartridge's tool: one exchange with the bot.
// A confirmation the exchange needs is asked as an MCP input request
// (elicitation): the call answers with the question and the exchange
// waits for the client's retry with the answer (the SDK asks clients of
// protocols before 2026-07-28 itself and retries within the same call).
func (s *Server) ask(b *bot.Bot) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		p := req.Params
		if p.RequestState != "" {
			r := s.runs.take(p.RequestState)
			if r == nil {
				return textResult("this confirmation is no longer pending: it was answered, or it waited too long", true), nil
			}
			allowed := false
			if er, ok := p.InputResponses[confirmID].(*sdk.ElicitResult); ok && er.Action == "accept" {
				allowed, _ = er.Content["allow"].(bool)
			}
			r.follow(ctx, req)
			r.answers <- allowed
			return s.await(ctx, r)
		}
		var in struct {
			Message string `json:"message"`
			State   string `json:"state"`
		}
		if len(p.Arguments) > 0 {
			if err := json.Unmarshal(p.Arguments, &in); err != nil {
				return textResult("the arguments must be {message: text, state: text}: "+err.Error(), true), nil
			}
		}
		if strings.TrimSpace(in.Message) == "" {
			return textResult("message is empty: give the text to send to the bot", true), nil
		}
		caps := req.ClientCapabilities()
		r := &run{
			id: newID(), steps: make(chan step, 1), answers: make(chan bool, 1),
			elicit: caps != nil && caps.Elicitation != nil, allow: s.cfg.AllowTools, allowTool: s.cfg.AllowTool,
		}
		r.follow(ctx, req)
		runCtx, cancel := context.WithCancel(s.life)
		r.cancel = cancel
		x := bot.Exchange{
			Mode: cartridge.Eval, Key: strings.TrimSpace(in.State), Wait: true,
			OnEvent: r.event, Confirmer: r, Output: s.cfg.Output,
		}
		go func() {
			defer cancel()
			res, err := b.Ask(runCtx, x, in.Message)
			var out *sdk.CallToolResult
			switch {
			case err != nil:
				out = textResult(err.Error(), true)
			case res.Notice != "":
				// A limit stopped the exchange: the state key keeps the
				// conversation, and the notice says how to go on.
				out = textResult(strings.TrimSpace(res.Text+"\n\n[nb: "+res.Notice+"]"), false)
			case res.Streamed || res.Display == "":
				out = textResult(res.Text, false)
			default:
				out = textResult(res.Display, false)
			}
			r.steps <- step{result: out}
		}()
		return s.await(ctx, r)
	}
}

// confirmID names the confirmation among a call's input requests.
const confirmID = "confirm"

// pendingTimeout is how long an exchange waits for the answer to a
// confirmation before it is stopped.
const pendingTimeout = 10 * time.Minute

// await waits for the exchange's next step: its end, or a question for
// the client. A call the client cancels stops the exchange (the
// provider's request, the tools it runs).
func (s *Server) await(ctx context.Context, r *run) (*sdk.CallToolResult, error) {
	select {
	case st := <-r.steps:
		if st.result != nil {
			return st.result, nil
		}
		s.runs.put(r)
		return &sdk.CallToolResult{RequestState: r.id, InputRequests: sdk.InputRequestMap{confirmID: &sdk.ElicitParams{
			Message: fmt.Sprintf("The bot wants to run the tool %s:\n%s\nAllow it?", st.call.Name, st.question),
			RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"allow": map[string]any{"type": "boolean", "title": "Allow", "description": "Run the tool " + st.call.Name},
				},
				"required": []any{"allow"},
			},
		}}}, nil
	case <-ctx.Done():
		r.cancel()
		return nil, ctx.Err()
	}
}

// run is one exchange, which may span several calls of its tool (one
// more for each confirmation the client answers).
type run struct {
	id        string
	steps     chan step // from the exchange: a question, or its result
	answers   chan bool // to the exchange: the client's answers
	cancel    context.CancelFunc
	elicit    bool     // the client takes elicitation requests
	allow     bool     // without elicitation, run tools that need confirmation
	allowTool []string // without elicitation, run these tools

	mu       sync.Mutex
	progress *progress // the current call's progress notifications
}

// step is the exchange's next step: a confirmation to ask, or its result.
type step struct {
	question string
	call     tool.Call
	result   *sdk.CallToolResult
}

// follow makes the exchange's progress go to the call req.
func (r *run) follow(ctx context.Context, req *sdk.CallToolRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.progress = &progress{ctx: ctx, session: req.Session, token: req.Params.GetProgressToken()}
}

func (r *run) event(ev agent.Event) {
	r.mu.Lock()
	p := r.progress
	r.mu.Unlock()
	p.event(ev)
}

// Confirm asks the client through an input request when it takes
// elicitation; otherwise the call runs only with AllowTools.
func (r *run) Confirm(ctx context.Context, call tool.Call, text string) (bool, error) {
	if !r.elicit {
		return r.allow || slices.Contains(r.allowTool, call.Name), nil
	}
	select {
	case r.steps <- step{question: text, call: call}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case allowed := <-r.answers:
		return allowed, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// runs are the exchanges waiting for a client's answer.
type runs struct {
	mu sync.Mutex
	m  map[string]*run
}

// put keeps r until its answer comes, or stops it after pendingTimeout.
func (rs *runs) put(r *run) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[string]*run{}
	}
	rs.m[r.id] = r
	time.AfterFunc(pendingTimeout, func() {
		if rs.take(r.id) != nil {
			r.cancel()
		}
	})
}

// take removes and returns the run waiting under id.
func (rs *runs) take(id string) *run {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.m[id]
	delete(rs.m, id)
	return r
}

// newID is an unguessable run id: whoever holds it answers the run's
// confirmation.
func newID() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand does not fail on Linux
	return hex.EncodeToString(b[:])
}

// run is the handler of a robopage function.
func (s *Server) run(t tool.Tool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		args := map[string]any{}
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return textResult("the arguments must be an object: "+err.Error(), true), nil
			}
		}
		out, err := t.Run(ctx, tool.Call{Name: t.Spec().Name, Arguments: args})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return textResult(err.Error(), true), nil
		}
		switch v := out.(type) {
		case string:
			return textResult(v, false), nil
		case *tool.Result:
			return textResult(v.Text, v.IsError), nil
		}
		data, err := json.Marshal(out)
		if err != nil {
			return textResult(fmt.Sprint(out), false), nil
		}
		return textResult(string(data), false), nil
	}
}

// progress turns a bot's events into progress notifications, when the
// client asked for them (it sent a progress token).
type progress struct {
	ctx     context.Context
	session *sdk.ServerSession
	token   any
	mu      sync.Mutex
	n       float64
}

func (p *progress) event(ev agent.Event) {
	if p == nil || p.token == nil {
		return
	}
	var msg string
	switch ev.Kind {
	case agent.TextDelta, agent.Answer:
		msg = ev.Text
	case agent.ToolStart:
		if ev.Call != nil {
			msg = "running the tool " + ev.Call.Name
		}
	case agent.RoundStart:
		msg = "asking " + strings.TrimSpace(ev.Provider+" "+ev.Model)
	case agent.Waiting, agent.Feedback:
		msg = ev.Text
	case agent.Retry:
		msg = fmt.Sprintf("retrying after an error: %v", ev.Err)
	default:
		return
	}
	if msg == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	p.session.NotifyProgress(p.ctx, &sdk.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Message: msg}) //nolint:errcheck // progress is best-effort
}
