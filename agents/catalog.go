package agents

import (
	"context"
	"fmt"
	"sync"

	"github.com/nbots/nb/agentproto"
)

// Set is a Catalog kept in memory, safe for concurrent use: a server may
// replace its agents while runs go on (a run keeps the agent it started
// with).
type Set struct {
	mu     sync.RWMutex
	list   []*Agent
	byName map[string]*Agent
}

// NewSet returns a Set of agents; two agents with one name are an error
// naming both.
func NewSet(agents ...*Agent) (*Set, error) {
	s := &Set{}
	for _, a := range agents {
		if err := s.Add(a); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Add adds an agent; its name must be new.
func (s *Set) Add(a *Agent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byName == nil {
		s.byName = map[string]*Agent{}
	}
	if old, ok := s.byName[a.Name()]; ok {
		return fmt.Errorf("%s: the agent %s is already defined by %s: agents need distinct names (meta.name)", a.Source, a.Name(), old.Source)
	}
	s.byName[a.Name()] = a
	s.list = append(s.list, a)
	return nil
}

// Replace makes agents the whole set.
func (s *Set) Replace(agents []*Agent) error {
	next, err := NewSet(agents...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.list, s.byName = next.list, next.byName
	s.mu.Unlock()
	return nil
}

// Agent implements Catalog.
func (s *Set) Agent(_ context.Context, name string) (*Agent, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.byName[name]
	if !ok {
		return nil, &Failure{Code: agentproto.CodeUnknownAgent, Message: fmt.Sprintf("there is no agent %q on this server (GET /agents lists them)", name)}
	}
	return a, nil
}

// Agents implements Catalog.
func (s *Set) Agents(context.Context) []*Agent {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]*Agent(nil), s.list...)
}
