package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/graphview"
)

// pipelineSubcommands are nb pipeline's commands.
var pipelineSubcommands = []string{"check", "run", "resume", "graph", "events"}

const pipelineUsage = "nb pipeline check|run|resume|events|graph ... (nb pipeline --help)"

// isPipelineCommand tells nb pipeline check … from a cartridge named
// pipeline (nb pipeline - eval hi).
func isPipelineCommand(args []string) bool {
	if len(args) >= 3 {
		switch args[2] {
		case "eval", "repl", "state", "cartridge", "mcp":
			return false
		}
	}
	return true
}

// pipelineCommand runs nb pipeline: attractor's DOT pipelines
// (docs/pipelines.md).
func (a *App) pipelineCommand(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return a.pipelineCheck(args[1:])
		case "graph":
			return a.pipelineGraph(args[1:])
		case "run":
			return a.pipelineRun(args[1:])
		case "resume":
			return a.pipelineResume(args[1:])
		case "events":
			return a.pipelineEvents(args[1:])
		}
	}
	fs := a.flags("nb pipeline", "nb pipeline check [--json] FLOW.dot\nnb pipeline run [flags] FLOW.dot\nnb pipeline resume [flags] DIR\nnb pipeline events --store URL ID\nnb pipeline graph [--run DIR] [--svg] FLOW.dot",
		`Pipelines are attractor's multi-stage workflows written as Graphviz DOT graphs
(plan -> implement -> test -> review loops, human gates, parallel branches,
goal gates): check reads and lints one, run runs it with a cartridge's bot as
its LLM steps, resume continues a run that stopped, graph draws it with the
path a run took. See docs/pipelines.md; nb pipeline COMMAND --help tells more.`)
	if len(args) > 0 && args[0] == "help" {
		args[0] = "--help"
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return &usageError{"missing command: " + pipelineUsage}
	}
	if s := cartridge.Nearest(fs.Arg(0), pipelineSubcommands); s != "" {
		return &usageError{fmt.Sprintf("unknown command %q: did you mean nb pipeline %s?", fs.Arg(0), s)}
	}
	return &usageError{fmt.Sprintf("unknown command %q: %s", fs.Arg(0), pipelineUsage)}
}

// checkReport is check --json's output.
type checkReport struct {
	File        string                  `json:"file"`
	OK          bool                    `json:"ok"`
	Errors      int                     `json:"errors"`
	Warnings    int                     `json:"warnings"`
	Diagnostics []pipeline.Diagnostic   `json:"diagnostics"`
	Graph       *pipeline.ResolvedGraph `json:"graph"`
}

// pipelineCheck is nb pipeline check: parse, transform, validate, and
// print every diagnostic as FILE:LINE:COL: severity: rule: message.
func (a *App) pipelineCheck(args []string) error {
	fs := a.flags("nb pipeline check", "nb pipeline check [--json] [--set key=value]... FLOW.dot",
		`Reads FLOW.dot as nb pipeline run would (parse, defaults, subgraph classes,
$goal and --set variables, the model stylesheet) and prints every diagnostic of
the specification's thirteen lint rules and nb's own, one per line as
FLOW.dot:LINE:COL: error|warning: rule: message (node or edge), then a summary.
Exit 1 when there is an error (nb pipeline run refuses such a flow), else 0.
--json prints the diagnostics and the resolved graph instead: every node's
attributes after defaults, classes and the stylesheet, with where each came
from, and the values the engine will use (model, provider, retries, fidelity).`)
	asJSON := fs.Bool("json", false, "print the diagnostics and the resolved graph as JSON")
	sets := fs.StringArray("set", nil, "a variable for the prompts, `key=value` (as nb pipeline run --set)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{"nb pipeline check needs one flow file: nb pipeline check FLOW.dot"}
	}
	vars, err := parseSets(*sets)
	if err != nil {
		return err
	}
	file := fs.Arg(0)
	src, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read the flow: %w", err)
	}
	g, diags, err := pipeline.LoadWith(file, src, pipeline.LoadOptions{Vars: vars})
	var se *pipeline.SyntaxError
	if errors.As(err, &se) {
		diags = []pipeline.Diagnostic{se.Diagnostic()}
	} else if err != nil {
		return err
	}
	errs, warns := 0, 0
	for _, d := range diags {
		switch d.Severity {
		case pipeline.Error:
			errs++
		case pipeline.Warning:
			warns++
		}
	}
	if *asJSON {
		rep := checkReport{File: file, OK: errs == 0, Errors: errs, Warnings: warns, Diagnostics: diags}
		if rep.Diagnostics == nil {
			rep.Diagnostics = []pipeline.Diagnostic{}
		}
		if g != nil {
			r := pipeline.Resolve(g)
			rep.Graph = &r
		}
		enc := json.NewEncoder(a.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		var b strings.Builder
		for _, d := range diags {
			b.WriteString(d.String(file) + "\n")
		}
		if g != nil {
			fmt.Fprintf(&b, "%s: digraph %s, %d nodes, %d edges", file, g.Name, len(g.Nodes), len(g.Edges))
			if goal := g.Goal(); goal != "" {
				fmt.Fprintf(&b, ", goal %q", goal)
			}
			fmt.Fprintf(&b, ": %s, %s\n", plural(errs, "error"), plural(warns, "warning"))
		}
		if _, err := a.Stdout.WriteString(b.String()); err != nil {
			return err
		}
	}
	if errs > 0 {
		return &reportedError{fmt.Sprintf("%s has %s", file, plural(errs, "error"))}
	}
	return nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// parseSets reads --set key=value flags.
func parseSets(sets []string) (map[string]string, error) {
	vars := map[string]string{}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, &usageError{fmt.Sprintf("--set %q: write key=value", kv)}
		}
		vars[strings.TrimSpace(k)] = v
	}
	return vars, nil
}

// pipelineGraph is nb pipeline graph: the flow as text, or as SVG through
// Graphviz's dot, with a run's path marked.
func (a *App) pipelineGraph(args []string) error {
	fs := a.flags("nb pipeline graph", "nb pipeline graph [--run DIR] [--svg] FLOW.dot",
		`Prints the pipeline of FLOW.dot as text: its nodes from the start, each with
its handler (and model) and its edges with their labels and conditions. With
--run DIR (a run folder of nb pipeline run), the nodes the run completed are
marked ✓ (×N for N visits), the edges it took ⇒, and where it stopped ▶.
--svg writes an SVG drawing instead, through Graphviz's dot command (Debian:
apt install graphviz), the same marks in colour.`)
	run := fs.String("run", "", "mark the path of the run in `DIR` (its checkpoint.json)")
	svg := fs.Bool("svg", false, "write SVG (needs Graphviz's dot on PATH)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{"nb pipeline graph needs one flow file: nb pipeline graph FLOW.dot"}
	}
	file := fs.Arg(0)
	src, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read the flow: %w", err)
	}
	g, _, err := pipeline.Load(file, src)
	if err != nil {
		return err
	}
	var path *graphview.Path
	if *run != "" {
		if path, err = readRunPath(*run); err != nil {
			return err
		}
	}
	if !*svg {
		return graphview.Text(a.Stdout, g, path)
	}
	dotPath, err := exec.LookPath("dot")
	if err != nil {
		return errors.New("--svg needs Graphviz's dot command, which is not on PATH: install Graphviz (Debian: apt install graphviz), or leave out --svg for the text drawing")
	}
	var in, out, stderr bytes.Buffer
	if err := graphview.DOT(&in, g, path); err != nil {
		return err
	}
	cmd := exec.CommandContext(context.Background(), dotPath, "-Tsvg")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = &in, &out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("Graphviz's dot failed (%v): %s", err, strings.TrimSpace(stderr.String()))
	}
	_, err = a.Stdout.Write(out.Bytes())
	return err
}

// readRunPath reads the path of a run from DIR/checkpoint.json (§5.3's
// completed_nodes and current_node).
func readRunPath(dir string) (*graphview.Path, error) {
	file := filepath.Join(dir, "checkpoint.json")
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--run %s: %w (give the run folder of nb pipeline run, which holds checkpoint.json)", dir, err)
	}
	var cp struct {
		CompletedNodes []string `json:"completed_nodes"`
		CurrentNode    string   `json:"current_node"`
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("%s does not parse as a checkpoint: %v", file, err)
	}
	return &graphview.Path{Completed: cp.CompletedNodes, Current: cp.CurrentNode}, nil
}
