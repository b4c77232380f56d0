package gatewayrun

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/nbots/nb/gateway/config"
)

// TestAcquireLockReplicas: replicas of one gateway (on a bus) lock the
// workspace and the accounts side by side; a gateway alone is refused
// beside them, naming a replica, and starts once they are gone; a
// replica is refused beside a gateway alone.
func TestAcquireLockReplicas(t *testing.T) {
	dir := t.TempDir()
	c := &config.Config{Workspace: "/home/me/ws"}
	c.Channels.Each = map[string]json.RawMessage{"telegram": json.RawMessage(`{"enabled": true, "token": "123:secret"}`)}
	a, err := AcquireLock(c, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := AcquireLock(c, dir, true)
	if err != nil {
		t.Fatalf("a second replica: %v", err)
	}
	if err := b.SetAddress("127.0.0.1:18791"); err != nil {
		t.Fatal(err)
	}
	_, err = AcquireLock(c, dir, false)
	var held *LockedError
	if !errors.As(err, &held) || !held.Replica || held.Address != "127.0.0.1:18791" || held.PID != os.Getpid() ||
		!strings.Contains(err.Error(), "a replica of nb gateway on a bus (pid") || !strings.Contains(err.Error(), "join it with the same --bus") {
		t.Errorf("a gateway alone beside replicas: %v", err)
	}
	a.Release()
	b.Release()
	alone, err := AcquireLock(c, dir, false)
	if err != nil {
		t.Fatalf("once the replicas are gone: %v", err)
	}
	defer alone.Release()
	_, err = AcquireLock(c, dir, true)
	if !errors.As(err, &held) || held.Replica || !strings.Contains(err.Error(), "another nb gateway") {
		t.Errorf("a replica beside a gateway alone: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if b, _ := os.ReadFile(dir + "/" + e.Name()); strings.Contains(e.Name()+string(b), "secret") {
			t.Errorf("%s shows the token: %s", e.Name(), b)
		}
	}
}
