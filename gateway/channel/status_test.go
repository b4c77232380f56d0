package channel

import (
	"errors"
	"testing"
	"time"
)

// A Backoff with Conn marks the connection down with each failure and up
// once connected, and starts its waits over then.
func TestBackoffReportsTheConnection(t *testing.T) {
	var conn Conn
	b := Backoff{Base: time.Second, Max: time.Minute, Conn: &conn}
	if st := conn.Status(); st.State != Connecting || st.Reason != "" {
		t.Fatalf("before Run: %+v, want connecting without a reason", st)
	}
	b.Failed(errors.New("dial tcp: refused"), 0)
	if d := b.Failed(errors.New("dial tcp: refused again"), 0); d != 2*time.Second {
		t.Errorf("second wait %v, want 2s", d)
	}
	if st := conn.Status(); st.State != Connecting || st.Reason != "dial tcp: refused again" || st.Since.IsZero() {
		t.Errorf("after failures: %+v, want connecting with the last failure", st)
	}
	b.Connected()
	if st := conn.Status(); st.State != Connected || st.Reason != "" {
		t.Errorf("after Connected: %+v, want connected", st)
	}
	if d := b.Failed(errors.New("EOF"), 0); d != time.Second {
		t.Errorf("wait after a connection %v, want Base again", d)
	}
	if st := conn.Status(); st.State != Connecting || st.Reason != "EOF" {
		t.Errorf("after losing it: %+v", st)
	}
}
