// Package handler holds the node handlers of attractor pipelines (§4):
// start, exit, conditional, tool, codergen (an LLM stage run as one
// exchange of an nb cartridge), wait.human with its Interviewers,
// parallel and fan-in, and the manager loop. Register wires them into an
// engine registry.
package handler

import (
	"context"
	"fmt"

	"github.com/nbots/nb/pipeline/engine"
)

// Options are what the handlers share.
type Options struct {
	// Backend runs LLM stages; nil runs them simulated (§4.5).
	Backend Backend
	// Interviewer asks the questions of human gates; nil is AutoApprove.
	Interviewer Interviewer
	// Environ is the environment tool commands and hooks draw their
	// allow-listed variables from (NAME=value entries).
	Environ []string
	// Dir is where tool commands and hooks run ("" is the current folder).
	Dir string
}

// Register registers every handler of this package in reg and makes
// codergen its default.
func Register(reg *engine.Registry, o Options) {
	if o.Interviewer == nil {
		o.Interviewer = AutoApprove{}
	}
	cg := &Codergen{Backend: o.Backend, Environ: o.Environ, Dir: o.Dir}
	reg.Register("start", engine.HandlerFunc(Start))
	reg.Register("exit", engine.HandlerFunc(Exit))
	reg.Register("conditional", engine.HandlerFunc(Conditional))
	reg.Register("codergen", cg)
	reg.Register("tool", &Tool{Environ: o.Environ, Dir: o.Dir})
	reg.Register("wait.human", &WaitHuman{Interviewer: o.Interviewer})
	reg.Register("parallel", engine.HandlerFunc(Parallel))
	reg.Register("parallel.fan_in", &FanIn{Backend: o.Backend})
	reg.Register("stack.manager_loop", &ManagerLoop{Handlers: reg})
	reg.Default = cg
}

// NewRegistry is a registry with every handler of this package.
func NewRegistry(o Options) *engine.Registry {
	reg := engine.NewRegistry()
	Register(reg, o)
	return reg
}

// Start is §4.3's handler: SUCCESS.
func Start(context.Context, *engine.Stage) (engine.Outcome, error) {
	return engine.Outcome{Status: engine.Success}, nil
}

// Exit is §4.4's handler: SUCCESS (the engine checks goal gates before).
func Exit(context.Context, *engine.Stage) (engine.Outcome, error) {
	return engine.Outcome{Status: engine.Success}, nil
}

// Conditional is §4.7's handler with nb's choice D16: it passes the
// previous stage's status and preferred label through, so that a
// diamond's `outcome=…` conditions test the stage before it (a diamond's
// own status is always SUCCESS, which would make §2.13's
// `outcome!=success` edge dead).
func Conditional(_ context.Context, s *engine.Stage) (engine.Outcome, error) {
	o := engine.Outcome{Status: engine.Success, Notes: "Conditional node evaluated: " + s.Node.ID}
	if p := s.Previous; p != nil && p.Status != "" {
		o.Status, o.PreferredLabel = p.Status, p.PreferredLabel
		if p.Status == engine.Fail {
			o.FailureReason = p.FailureReason
			if o.FailureReason == "" {
				o.FailureReason = fmt.Sprintf("passed through from the stage before %s", s.Node.ID)
			}
		}
	}
	return o, nil
}
