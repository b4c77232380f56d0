package robopage

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/nbots/nb/tool"
)

// Tool is a robopage function as a tool of the agent loop. Run executes
// the function with the library's executor and returns its content as
// text, the same text POST /process answers.
type Tool struct {
	// Function is the page function the tool runs.
	Function *Function
	// Executor runs it, with its limits.
	Executor *Executor
}

var _ tool.Tool = (*Tool)(nil)

// Spec describes the function with the openai flavor's schema.
func (t *Tool) Spec() tool.Spec {
	return tool.Spec{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Schema()}
}

// Run executes one call. Numbers and booleans are passed as their text;
// an error (a missing argument, no container engine) is returned for the
// model to read, as rigging shows the server's 400 text.
func (t *Tool) Run(ctx context.Context, call tool.Call) (any, error) {
	args, err := StringArgs(call.Arguments)
	if err != nil {
		return nil, err
	}
	return t.Executor.Call(ctx, t.Function, args)
}

// Tools returns the functions of the pages whose path contains filter
// (all when empty) as tools run by ex. Share one executor across a
// program: it bounds the runs in progress. A nil ex is an Executor
// without environment, which finds programs by absolute path only.
func (l *Library) Tools(filter string, ex *Executor) []tool.Tool {
	if ex == nil {
		ex = &Executor{}
	}
	var out []tool.Tool
	for _, p := range l.Filter(filter) {
		for _, f := range p.Functions {
			out = append(out, &Tool{Function: f, Executor: ex})
		}
	}
	return out
}

// LoadTools loads the pages at path (a page file or a folder, resolved
// with ResolvePath) and returns the functions of those whose path
// contains filter as tools run by ex, with the problems of the pages
// that were skipped. This is what a cartridge's `robopages:` entry does.
// ctx is reserved for loading that needs it (images are made on first
// use, not here).
func LoadTools(ctx context.Context, path, filter string, ex *Executor) ([]tool.Tool, []Problem, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	lib, err := Load(path, "")
	if err != nil {
		return nil, nil, err
	}
	return lib.Tools(filter, ex), lib.Problems, nil
}

// ResolvePath resolves a cartridge's `robopages` path: ~ and $VAR are
// expanded with environ (nb's environment, NAME=value), and a relative
// path is taken relative to baseDir (the folder of the cartridge file).
func ResolvePath(path, baseDir string, environ []string) string {
	p := ExpandPath(path, environ)
	if !filepath.IsAbs(p) && baseDir != "" {
		p = filepath.Join(baseDir, p)
	}
	return p
}

// StringArgs converts decoded JSON arguments to the text values a page
// interpolates. Text is kept; numbers and booleans become their JSON text
// (the reference accepts text only, so clients that follow a `type:
// integer` schema fail there); null means the argument is not given.
// Lists and objects are errors.
func StringArgs(args map[string]any) (map[string]string, error) {
	out := make(map[string]string, len(args))
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		switch v := args[k].(type) {
		case nil:
		case string:
			out[k] = v
		case bool:
			out[k] = strconv.FormatBool(v)
		case json.Number:
			out[k] = v.String()
		case float64:
			out[k] = strconv.FormatFloat(v, 'f', -1, 64)
		case float32:
			out[k] = strconv.FormatFloat(float64(v), 'f', -1, 32)
		case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
			out[k] = fmt.Sprint(v)
		default:
			return nil, fmt.Errorf("argument %s must be text, a number or a boolean, not a list or an object", k)
		}
	}
	return out, nil
}
