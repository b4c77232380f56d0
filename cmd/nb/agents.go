package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/agents"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/cmd/nb/cliflag"
	"github.com/nbots/nb/internal/bytesize"
	"github.com/nbots/nb/server"
	"github.com/nbots/nb/server/agentsrv"
	"github.com/nbots/nb/term"
	"github.com/nbots/nb/tool"
)

const agentsUsage = "use nb agents list URL, or nb agents run URL/NAME [MESSAGE] [--input JSON] [--context JSON] [--parameters JSON] [--tools CARTRIDGE] [--json]"

// isAgentsCommand tells nb agents from a cartridge named agents (nb
// agents - eval hi).
func isAgentsCommand(args []string) bool {
	if len(args) >= 3 {
		switch args[2] {
		case "eval", "repl", "state", "cartridge":
			return false
		}
	}
	return true
}

// agentsCommand runs nb agents: a client of the agent protocol
// (docs/agent-protocol.md). The token (--token, else NB_AGENTS_TOKEN) is
// sent to the server named on the command line, and to no other.
func (a *App) agentsCommand(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "list":
			return a.agentsList(args[1:])
		case "run":
			return a.agentsRun(args[1:])
		}
	}
	fs := a.flags("nb agents", "nb agents list [flags] URL\nnb agents run [flags] URL/NAME [MESSAGE]", `A client of the agent protocol (docs/agent-protocol.md): lists the agents of an
nb server (nb serve) and runs one of them. nb agents COMMAND --help tells more.`)
	if len(args) > 0 && args[0] == "help" {
		args[0] = "--help"
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return &usageError{"missing command: " + agentsUsage}
	}
	if s := cartridge.Nearest(fs.Arg(0), []string{"list", "run"}); s != "" {
		return &usageError{fmt.Sprintf("unknown command %q: did you mean nb agents %s?", fs.Arg(0), s)}
	}
	return &usageError{fmt.Sprintf("unknown command %q: %s", fs.Arg(0), agentsUsage)}
}

// agentsClientFlags are the flags of every nb agents command.
type agentsClientFlags struct {
	token  *string
	asJSON *bool
}

func (a *App) agentsFlagSet(name, usage, about string) (*cliflag.Set, agentsClientFlags) {
	fs := a.flags(name, usage, about)
	return fs, agentsClientFlags{
		token:  fs.String("token", "", "the server's `token` (default NB_AGENTS_TOKEN; prefer the variable: a flag shows in the process list)"),
		asJSON: fs.Bool("json", false, "print JSON (for run: the protocol's frames, one per line)"),
	}
}

// client is the agent protocol's client of base, with the token of
// --token or NB_AGENTS_TOKEN.
func (a *App) agentsClient(base string, f agentsClientFlags) (*agentproto.Client, error) {
	token := *f.token
	if token == "" {
		token = a.Getenv("NB_AGENTS_TOKEN")
	}
	c, err := agentproto.NewClient(base, token)
	if err != nil {
		return nil, &usageError{err.Error()}
	}
	return c, nil
}

func (a *App) agentsList(args []string) error {
	fs, f := a.agentsFlagSet("nb agents list", "nb agents list [flags] URL", "Lists the agents of an nb server (http://host:port): their names, the type and\ninput they take, their descriptions.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{"nb agents list takes one server address (http://host:port)"}
	}
	c, err := a.agentsClient(fs.Arg(0), f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(a.context(), 30*time.Second)
	defer cancel()
	list, err := c.Agents(ctx)
	if err != nil {
		return a.agentsError(fs.Arg(0), f, err)
	}
	if *f.asJSON {
		enc := json.NewEncoder(a.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	w := tabwriter.NewWriter(a.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tTYPE\tINPUT\tDESCRIPTION")
	for _, r := range list {
		input := "text"
		if t, _ := r.InputSchema["type"].(string); t != "" && t != "string" {
			input = t
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.Name, r.Type, input, oneLine(r.Description))
	}
	return w.Flush()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// agentRun is one nb agents run.
type agentRun struct {
	app    *App
	conn   *agentproto.Conn
	asJSON bool
	// lent are the tools of --tools, run here when the agent calls them.
	lent *tool.Set
	// lentCart is the cartridge each lent tool comes from.
	lentCart  map[string]*cartridge.Cartridge
	confirmer *term.Confirmer
	confirmMu sync.Mutex
	// streamed is the text of the run's own current step written so far.
	streamed strings.Builder
	lastText string
}

func (a *App) agentsRun(args []string) error {
	fs, f := a.agentsFlagSet("nb agents run", "nb agents run [flags] URL/NAME [MESSAGE]", `Runs the agent NAME of an nb server (http://host:port/NAME) with the message
(words, else standard input) or --input: its text streams on stdout, its steps
and tool calls on stderr. Tools of --tools run here, on this machine, with the
usual confirmation.`)
	input := fs.String("input", "", "the run's input as `JSON` (instead of a message)")
	runContext := fs.String("context", "", "the run's context, a `JSON` value")
	parameters := fs.String("parameters", "", "the run's parameters, a `JSON` object")
	lend := fs.StringSlice("tools", nil, "lend the tools of the `cartridge` to the agent: they run here (repeatable, or comma-separated)")
	yes := fs.BoolP("yes", "y", false, "approve every tool call of this run without asking")
	allowTools := fs.StringSlice("allow-tool", nil, "approve every call of the tool `name` (repeatable, or comma-separated)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	words := fs.Args()
	if *yes {
		a.approve.All = true
	}
	for _, t := range *allowTools {
		a.approve.Allow(t)
	}
	if len(words) == 0 {
		return &usageError{"nb agents run needs the agent's address: http://host:port/NAME"}
	}
	base, name, err := agentproto.ParseAgentURL(words[0])
	if err != nil {
		return &usageError{err.Error()}
	}
	run := &agentproto.Frame{Chunks: true}
	switch {
	case *input != "":
		if len(words) > 1 {
			return &usageError{"give the input either as words or with --input, not both"}
		}
		if err := json.Unmarshal([]byte(*input), &run.Input); err != nil {
			return &usageError{"--input is not JSON: " + err.Error()}
		}
	default:
		msg, err := a.message(words[1:])
		if err != nil {
			return err
		}
		if strings.TrimSpace(msg) == "" {
			return &usageError{"nothing to send: give the message as words, on standard input, or as --input JSON"}
		}
		run.Input = msg
	}
	if s := *runContext; s != "" {
		if err := json.Unmarshal([]byte(s), &run.Context); err != nil {
			return &usageError{"--context is not JSON: " + err.Error()}
		}
	}
	if s := *parameters; s != "" {
		if err := json.Unmarshal([]byte(s), &run.Parameters); err != nil || run.Parameters == nil {
			return &usageError{"--parameters is not a JSON object"}
		}
	}
	r := &agentRun{app: a, asJSON: *f.asJSON}
	for _, path := range *lend {
		cart, err := a.loadCartridge(path)
		if err != nil {
			return err
		}
		tools, err := bot.ToolsOf(a.context(), cart, a.host())
		if err != nil {
			return err
		}
		if tools.Len() == 0 {
			return fmt.Errorf("%s has no tools to lend", bot.DisplayPath(cart))
		}
		if r.lent == nil {
			r.lent, r.lentCart = &tool.Set{}, map[string]*cartridge.Cartridge{}
			printer := &term.Printer{W: a.Stderr, Err: a.Stderr, Cartridge: cart, Mode: cartridge.Eval, Color: term.ColorEnabled(a.Getenv, a.Stderr, a.Stderr)}
			r.confirmer = &term.Confirmer{Printer: printer, Stderr: a.Stderr, Approval: a.approve.Clone()}
		}
		for _, sp := range tools.Specs() {
			t, _ := tools.Lookup(sp.Name)
			if _, dup := r.lentCart[t.Spec().Name]; dup {
				return fmt.Errorf("--tools: two cartridges lend a tool named %s (the second is %s)", sp.Name, bot.DisplayPath(cart))
			}
			r.lent.Add(t)
			r.lentCart[t.Spec().Name] = cart
			run.Tools = append(run.Tools, agentproto.ToolRepr{Name: t.Spec().Name, Description: sp.Description, InputSchema: sp.Parameters})
		}
	}
	c, err := a.agentsClient(base, f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	dctx, dcancel := context.WithTimeout(a.context(), 30*time.Second) // a signal stops the dial
	conn, err := c.Start(dctx, name, run)
	dcancel()
	if err != nil {
		return a.agentsError(base, f, err)
	}
	defer conn.Abort()
	r.conn = conn
	// The run's own context: a signal (which ends the App's) stops the
	// run on the server and waits for it to end; a second one leaves.
	signalled := a.context()
	var stopped atomic.Pointer[signalError]
	go func() {
		select {
		case <-signalled.Done():
			se, _ := context.Cause(signalled).(*signalError)
			if se == nil {
				se = &signalError{sig: os.Interrupt}
			}
			stopped.Store(se)
			sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
			conn.Stop(sctx) //nolint:errcheck // the connection is dropped below anyway
			scancel()
			select {
			case <-a.signalAgain():
				cancel(se)
			case <-time.After(2 * time.Second):
				cancel(se)
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	}()
	err = r.loop(ctx)
	if se := stopped.Load(); se != nil {
		return se
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// loop reads the run's frames to its end.
func (r *agentRun) loop(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		data, err := r.conn.ReadRaw(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("the server closed the run without a result")
			}
			return err
		}
		f, err := agentproto.Decode(data)
		if err != nil {
			return fmt.Errorf("the server sent something that is not a frame: %v", err)
		}
		if r.asJSON {
			r.app.Stdout.Write(append(data, '\n')) //nolint:errcheck // nothing to do about a closed stdout
		}
		switch f.Type {
		case agentproto.TypeToolCall:
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, isError := r.runTool(ctx, f)
				r.conn.ToolResult(ctx, f.ID, out, isError) //nolint:errcheck // a broken connection ends the loop
			}()
		case agentproto.TypeConfirm:
			wg.Add(1)
			go func() {
				defer wg.Done()
				allow := r.confirm(ctx, f)
				r.conn.Confirm(ctx, f.ID, allow) //nolint:errcheck // as above
			}()
		}
		if !r.asJSON {
			r.show(f)
		}
		if f.Terminal() {
			if f.Type == agentproto.TypeError {
				return fmt.Errorf("the agent failed (%s): %s", f.Code, f.Message)
			}
			return nil
		}
	}
}

// show renders a frame for people: the run's own text on stdout as it
// comes, the rest on stderr.
func (r *agentRun) show(f *agentproto.Frame) {
	errw := r.app.Stderr
	who := ""
	if f.MinionID != "" {
		who = "[" + f.MinionID + "] "
	}
	switch f.Type {
	case agentproto.TypeStepChunk:
		if f.MinionID == "" {
			io.WriteString(r.app.Stdout, f.Delta) //nolint:errcheck // as above
			r.streamed.WriteString(f.Delta)
		}
	case agentproto.TypeStep:
		if f.MinionID == "" {
			if r.streamed.Len() > 0 && !strings.HasSuffix(r.streamed.String(), "\n") {
				io.WriteString(r.app.Stdout, "\n") //nolint:errcheck // as above
			}
			if f.Generated != nil {
				r.lastText = *f.Generated
			}
			r.streamed.Reset()
		} else if f.Generated != nil && strings.TrimSpace(*f.Generated) != "" {
			fmt.Fprintf(errw, "%s%s\n", who, strings.TrimSpace(*f.Generated))
		}
		for _, c := range f.ToolCalls {
			in, _ := json.Marshal(c.Input)
			fmt.Fprintf(errw, "%s-> %s %s\n", who, c.Name, in)
		}
	case agentproto.TypeToolResult:
		fmt.Fprintf(errw, "%s<- %s: %s\n", who, f.Name, oneLine(wireText(f.Output)))
	case agentproto.TypeMinionStart:
		fmt.Fprintf(errw, "%s%s started\n", "["+f.MinionID+"] ", f.Name)
	case agentproto.TypeMinionResult:
		if f.IsError {
			fmt.Fprintf(errw, "%sfailed: %s\n", who, f.Message)
		} else {
			fmt.Fprintf(errw, "%sdone: %s\n", who, oneLine(wireText(f.Result)))
		}
	case agentproto.TypeError:
		if !f.Terminal() {
			fmt.Fprintf(errw, "nb: %s%s: %s\n", who, f.Code, f.Message)
		}
	case agentproto.TypeFinalResult:
		// A text result was streamed as the last step; anything else is
		// printed as JSON.
		if s, ok := f.Result.(string); ok {
			if s != r.lastText {
				fmt.Fprintln(r.app.Stdout, s)
			}
			return
		}
		enc := json.NewEncoder(r.app.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(f.Result) //nolint:errcheck // as above
	}
}

// runTool runs a call of the agent to a lent tool, with the usual
// confirmation on the user's terminal.
func (r *agentRun) runTool(ctx context.Context, f *agentproto.Frame) (any, bool) {
	if r.lent == nil {
		return "nb agents run lent no tools (--tools CARTRIDGE lends a cartridge's)", true
	}
	t, ok := r.lent.Lookup(f.Name)
	if !ok {
		return fmt.Sprintf("Unknown tool: %s.", f.Name), true
	}
	args, _ := f.Input.(map[string]any)
	if args == nil {
		args = map[string]any{}
	}
	call := tool.Call{ID: f.ID, Name: f.Name, Arguments: args}
	if r.lentCart[t.Spec().Name].Confirmable() {
		if ro, ok := t.(tool.ReadOnly); !ok || !ro.ReadOnly() {
			in, _ := json.Marshal(args)
			r.confirmMu.Lock()
			allowed, err := r.confirmer.Confirm(ctx, call, t.Spec().Name+" "+string(in))
			r.confirmMu.Unlock()
			if err != nil || !allowed {
				return agent.DenialText, true
			}
		}
	}
	out, err := t.Run(ctx, call)
	if err != nil {
		return err.Error(), true
	}
	switch v := out.(type) {
	case *tool.Result:
		if v != nil {
			return v.Text, v.IsError
		}
	case tool.Result:
		return v.Text, v.IsError
	case int64, int, float64:
		// JSON has one kind of number: sent as a number, the 5 of a Lua
		// tool would reach the model as 5.0 (Lua's float). As text it
		// reads as in nb's other front-ends.
		return agent.Text(v), false
	}
	return out, false
}

// wireText renders a value that came through JSON as nb renders a tool's
// result: a whole number as 5, not 5.0.
func wireText(v any) string {
	if f, ok := v.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return agent.Text(v)
}

// confirm asks the user whether a server tool may run.
func (r *agentRun) confirm(ctx context.Context, f *agentproto.Frame) bool {
	in, _ := json.Marshal(f.Input)
	c := r.confirmer
	if c == nil {
		cart := cartridge.Default(nil)
		c = &term.Confirmer{Printer: &term.Printer{W: r.app.Stderr, Err: r.app.Stderr, Cartridge: cart, Mode: cartridge.Eval}, Stderr: r.app.Stderr, Approval: r.app.approve.Clone()}
	}
	args, _ := f.Input.(map[string]any)
	r.confirmMu.Lock()
	defer r.confirmMu.Unlock()
	ok, err := c.Confirm(ctx, tool.Call{ID: f.ID, Name: f.Name, Arguments: args}, "the agent's server asks to run "+f.Name+" "+string(in))
	return err == nil && ok
}

// agentOptions are nb serve's flags for the agent protocol.
type agentOptions struct {
	minions, tokens, id, maxFrame string
	hosts                         []string
	// mounted, when set, is given the handler once it serves.
	mounted func(*agentsrv.Handler)
}

// mountAgents serves the agent protocol on nb serve's server: the
// cartridges as agents, the minion file's agents, the remote hosts. It
// returns what closes the minions' bots.
func (a *App) mountAgents(ctx context.Context, srv *server.Server, host bot.Host, o agentOptions) (func(), error) {
	h := &agentsrv.Handler{}
	var err error
	if h.MaxFrame, err = bytesize.Parse(o.maxFrame); err != nil {
		return nil, &usageError{"--agent-max-frame: " + err.Error()}
	}
	rt := agents.New(nil)
	if o.id != "" {
		rt.ID = o.id
	}
	if rt.Remote, err = a.remoteHosts(o.hosts, o.tokens, host.LookupEnv); err != nil {
		return nil, err
	}
	var minions []*agents.Agent
	closeAll := func() {
		for _, m := range minions {
			m.Bot.Close() //nolint:errcheck // stopping anyway
		}
	}
	if o.minions != "" {
		base, err := srv.Model(ctx, server.DefaultID)
		if err != nil || base.Cartridge == nil {
			return nil, fmt.Errorf("--agent-minions: the default cartridge, whose provider the minions use, is not usable: %v", err)
		}
		h := host
		h.AllowHostCredentials = true // the operator's own file
		if minions, err = agents.LoadMinions(ctx, o.minions, base.Cartridge, h); err != nil {
			return nil, err
		}
	}
	h.Runtime = rt
	agentsrv.Mount(srv, h, minions)
	if o.mounted != nil {
		o.mounted(h)
	}
	return closeAll, nil
}

// remoteHosts are the agent servers of --agent-hosts (a list) and
// --agent-tokens (a file of hosts with their tokens). A file given to
// --agent-hosts, its older form, is read as --agent-tokens, with a
// deprecation line.
func (a *App) remoteHosts(hosts []string, tokensFile string, env func(string) (string, bool)) (agents.Remote, error) {
	var r agents.Remote
	files := []string{tokensFile}
	var list []string
	for _, h := range hosts {
		if fi, err := os.Stat(h); err == nil && fi.Mode().IsRegular() {
			fmt.Fprintf(a.Stderr, "nb: serve --agent-hosts FILE is deprecated: write --agent-tokens %s (--agent-hosts takes hosts)\n", h)
			files = append(files, h)
			continue
		}
		list = append(list, h)
	}
	for _, file := range files {
		if file == "" {
			continue
		}
		f, err := agents.LoadRemote(file, env)
		if err != nil {
			return r, err
		}
		r.Merge(f)
	}
	for _, h := range list {
		if err := agents.CheckHost(h); err != nil {
			return r, &usageError{"--agent-hosts: " + err.Error()}
		}
		r.AllowHosts = append(r.AllowHosts, h)
	}
	return r, nil
}
