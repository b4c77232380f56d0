package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/agents"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
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
// (docs/agent-protocol.md). NB_AGENTS_TOKEN, when set, is sent to the
// server named on the command line, and to no other.
func (a *App) agentsCommand(args []string) error {
	if len(args) == 0 {
		return &usageError{"missing command: " + agentsUsage}
	}
	switch args[0] {
	case "list":
		return a.agentsList(args[1:])
	case "run":
		return a.agentsRun(args[1:])
	}
	return &usageError{fmt.Sprintf("unknown command %q: %s", args[0], agentsUsage)}
}

// agentsFlags reads the options of nb agents: --name VALUE or
// --name=VALUE anywhere among the words.
func agentsFlags(args []string, withValue, bare map[string]bool) (map[string]string, []string, error) {
	opts := map[string]string{}
	var words []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			words = append(words, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(arg, "--") {
			words = append(words, arg)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		switch {
		case bare[name] && !hasValue:
			opts[name] = "true"
		case withValue[name]:
			if !hasValue {
				if i+1 >= len(args) {
					return nil, nil, &usageError{"--" + name + " needs a value"}
				}
				i++
				value = args[i]
			}
			opts[name] = value
		default:
			return nil, nil, &usageError{fmt.Sprintf("unknown option --%s: %s", name, agentsUsage)}
		}
	}
	return opts, words, nil
}

func (a *App) agentsList(args []string) error {
	opts, words, err := agentsFlags(args, nil, map[string]bool{"json": true})
	if err != nil {
		return err
	}
	if len(words) != 1 {
		return &usageError{"nb agents list takes one server address (http://host:port)"}
	}
	c, err := agentproto.NewClient(words[0], a.Getenv("NB_AGENTS_TOKEN"))
	if err != nil {
		return &usageError{err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := c.Agents(ctx)
	if err != nil {
		return err
	}
	if opts["json"] != "" {
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
	lent      *tool.Set
	lentCart  *cartridge.Cartridge
	confirmer *term.Confirmer
	confirmMu sync.Mutex
	// streamed is the text of the run's own current step written so far.
	streamed strings.Builder
	lastText string
}

func (a *App) agentsRun(args []string) error {
	opts, words, err := agentsFlags(args, map[string]bool{"input": true, "context": true, "parameters": true, "tools": true}, map[string]bool{"json": true})
	if err != nil {
		return err
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
	case opts["input"] != "":
		if len(words) > 1 {
			return &usageError{"give the input either as words or with --input, not both"}
		}
		if err := json.Unmarshal([]byte(opts["input"]), &run.Input); err != nil {
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
	if s := opts["context"]; s != "" {
		if err := json.Unmarshal([]byte(s), &run.Context); err != nil {
			return &usageError{"--context is not JSON: " + err.Error()}
		}
	}
	if s := opts["parameters"]; s != "" {
		if err := json.Unmarshal([]byte(s), &run.Parameters); err != nil || run.Parameters == nil {
			return &usageError{"--parameters is not a JSON object"}
		}
	}
	r := &agentRun{app: a, asJSON: opts["json"] != ""}
	if path := opts["tools"]; path != "" {
		cart, err := a.loadCartridge(path)
		if err != nil {
			return err
		}
		tools, err := bot.ToolsOf(context.Background(), cart, a.host())
		if err != nil {
			return err
		}
		if tools.Len() == 0 {
			return fmt.Errorf("%s has no tools to lend", bot.DisplayPath(cart))
		}
		r.lent, r.lentCart = tools, cart
		printer := &term.Printer{W: a.Stderr, Err: a.Stderr, Cartridge: cart, Mode: cartridge.Eval, Color: term.ColorEnabled(a.Getenv, a.Stderr, a.Stderr)}
		r.confirmer = &term.Confirmer{Printer: printer, Stderr: a.Stderr, Approval: a.approve.Clone()}
		for _, sp := range tools.Specs() {
			t, _ := tools.Lookup(sp.Name)
			run.Tools = append(run.Tools, agentproto.ToolRepr{Name: t.Spec().Name, Description: sp.Description, InputSchema: sp.Parameters})
		}
	}
	c, err := agentproto.NewClient(base, a.Getenv("NB_AGENTS_TOKEN"))
	if err != nil {
		return &usageError{err.Error()}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	conn, err := c.Start(dctx, name, run)
	dcancel()
	if err != nil {
		return err
	}
	defer conn.Abort()
	r.conn = conn
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var stopped os.Signal
	go func() {
		select {
		case sig := <-sigs:
			// Ctrl-C stops the run on the server; a second one leaves.
			stopped = sig
			sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
			conn.Stop(sctx) //nolint:errcheck // the connection is dropped below anyway
			scancel()
			select {
			case <-sigs:
				cancel(&signalError{sig: sig})
			case <-time.After(2 * time.Second):
				cancel(&signalError{sig: sig})
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	}()
	err = r.loop(ctx)
	if stopped != nil {
		return &signalError{sig: stopped}
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
		fmt.Fprintf(errw, "%s<- %s: %s\n", who, f.Name, oneLine(agent.Text(f.Output)))
	case agentproto.TypeMinionStart:
		fmt.Fprintf(errw, "%s%s started\n", "["+f.MinionID+"] ", f.Name)
	case agentproto.TypeMinionResult:
		if f.IsError {
			fmt.Fprintf(errw, "%sfailed: %s\n", who, f.Message)
		} else {
			fmt.Fprintf(errw, "%sdone: %s\n", who, oneLine(agent.Text(f.Result)))
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
	if r.lentCart.Confirmable() {
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
	}
	return out, false
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
	minions, hosts, id, maxFrame string
}

// mountAgents serves the agent protocol on nb serve's server: the
// cartridges as agents, the minion file's agents, the remote hosts. It
// returns what closes the minions' bots.
func (a *App) mountAgents(ctx context.Context, srv *server.Server, host bot.Host, o agentOptions) (func(), error) {
	h := &agentsrv.Handler{}
	var err error
	if h.MaxFrame, err = parseSize(o.maxFrame); err != nil {
		return nil, &usageError{"--agent-max-frame: " + err.Error()}
	}
	rt := agents.New(nil)
	if o.id != "" {
		rt.ID = o.id
	}
	if o.hosts != "" {
		if rt.Remote, err = agents.LoadRemote(o.hosts, host.LookupEnv); err != nil {
			return nil, err
		}
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
	return closeAll, nil
}
