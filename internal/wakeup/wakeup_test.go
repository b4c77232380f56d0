package wakeup

import "testing"

func TestWake(t *testing.T) {
	var s Set
	a, stopA := s.Register("x")
	b, stopB := s.Register("x")
	other, stopOther := s.Register("y")
	defer stopOther()
	s.Wake("x")
	s.Wake("x") // merged with the pending one, never blocks
	for name, ch := range map[string]chan struct{}{"a": a, "b": b} {
		select {
		case <-ch:
		default:
			t.Errorf("waiter %s not woken", name)
		}
	}
	select {
	case <-other:
		t.Error("a waiter of another id was woken")
	default:
	}
	stopA()
	stopB()
	if len(s.waiters) != 1 {
		t.Errorf("unregistered waiters kept: %v", s.waiters)
	}
}

func TestWakeAll(t *testing.T) {
	var s Set
	a, stopA := s.Register("x")
	defer stopA()
	b, stopB := s.Register("y")
	defer stopB()
	s.WakeAll()
	s.WakeAll() // merged, never blocks
	for name, ch := range map[string]chan struct{}{"x": a, "y": b} {
		select {
		case <-ch:
		default:
			t.Errorf("waiter of %s not woken", name)
		}
	}
}
