// Package function makes the functions a cartridge defines in its tools
// section (Lua, Fennel or Clojure sources) into tools the agent can call.
package function

import (
	"context"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/script"
	"github.com/nbots/nb/tool"
)

// Function is one cartridge tool.
type Function struct {
	def cartridge.ToolDef
	rt  *script.Runtime
}

// New returns the tool for def, run by rt.
func New(def cartridge.ToolDef, rt *script.Runtime) *Function {
	return &Function{def: def, rt: rt}
}

// Spec implements tool.Tool.
func (f *Function) Spec() tool.Spec { return f.def.Spec }

// Run implements tool.Tool: the source runs with `parameters` in scope.
func (f *Function) Run(ctx context.Context, call tool.Call) (any, error) {
	args := call.Arguments
	if args == nil {
		args = map[string]any{}
	}
	return f.rt.Call(ctx, Source(f.def.Source), script.Param{Name: "parameters", Value: args})
}

// Source converts cartridge code to the script runtime's form.
func Source(s cartridge.Source) script.Source {
	return script.Source{Lang: script.Lang(s.Lang), Code: s.Code, File: s.File, Line: s.Line}
}

// FromCartridge returns the cartridge's tools, run by rt.
func FromCartridge(c *cartridge.Cartridge, rt *script.Runtime) []tool.Tool {
	var out []tool.Tool
	for _, def := range c.Tools() {
		if def.Source.Lang == "" {
			continue // a robopage entry, loaded elsewhere
		}
		out = append(out, New(def, rt))
	}
	return out
}
