package engine

import (
	"context"
	"sync"

	"github.com/nbots/nb/pipeline"
)

// Handler runs one node (§4.1). An error is an exception: the engine
// retries it when ShouldRetry says so, else the stage fails with it. A
// panic is caught and fails the stage.
type Handler interface {
	Execute(ctx context.Context, s *Stage) (Outcome, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, s *Stage) (Outcome, error)

// Execute calls f.
func (f HandlerFunc) Execute(ctx context.Context, s *Stage) (Outcome, error) { return f(ctx, s) }

// ShapeTypes maps a node's shape to its handler type (§2.8, Appendix B).
var ShapeTypes = map[string]string{
	"Mdiamond":      "start",
	"Msquare":       "exit",
	"box":           "codergen",
	"hexagon":       "wait.human",
	"diamond":       "conditional",
	"component":     "parallel",
	"tripleoctagon": "parallel.fan_in",
	"parallelogram": "tool",
	"house":         "stack.manager_loop",
}

// Registry maps handler types to handlers (§4.2). It is safe for
// concurrent use.
type Registry struct {
	mu       sync.RWMutex
	handlers map[string]Handler
	// Default runs nodes whose type and shape name no registered handler
	// (the codergen handler).
	Default Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{handlers: map[string]Handler{}} }

// Register sets the handler of a type, replacing the one registered
// before.
func (r *Registry) Register(typ string, h Handler) {
	r.mu.Lock()
	r.handlers[typ] = h
	r.mu.Unlock()
}

// Lookup returns the handler registered for typ.
func (r *Registry) Lookup(typ string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.handlers[typ]
	return h, ok
}

// Resolve returns the handler of n and its type: the node's type when
// registered, else its shape's, else the default (§4.2).
func (r *Registry) Resolve(n *pipeline.Node) (Handler, string) {
	if t := nodeType(n); t != "" {
		if h, ok := r.Lookup(t); ok {
			return h, t
		}
	}
	if t, ok := ShapeTypes[nodeShape(n)]; ok {
		if h, ok := r.Lookup(t); ok {
			return h, t
		}
	}
	return r.Default, "codergen"
}
