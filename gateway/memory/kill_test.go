package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/internal/atomicfile"
	"github.com/nbots/nb/provider"
)

// fileSession keeps messages in a JSONL file (appended, a torn last line
// ignored as the gateway's session files quarantine it) and the cursor in
// a file written atomically.
type fileSession struct{ dir string }

func (s fileSession) Load(context.Context) ([]Message, int, error) {
	msgs, n, err := s.all()
	return msgs[min(max(n, 0), len(msgs)):], n, err
}

// all are every message and the cursor.
func (s fileSession) all() ([]Message, int, error) {
	data, _ := os.ReadFile(filepath.Join(s.dir, "msgs.jsonl"))
	var msgs []Message
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // torn
		}
		var m Message
		if err := json.Unmarshal(data[:i], &m); err != nil {
			return nil, 0, err
		}
		msgs = append(msgs, m)
		data = data[i+1:]
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "cursor"))
	if err != nil {
		return msgs, 0, nil
	}
	n, err := strconv.Atoi(string(b))
	return msgs, n, err
}

func (s fileSession) SetCursor(_ context.Context, n int) error {
	return atomicfile.WriteFile(filepath.Join(s.dir, "cursor"), []byte(strconv.Itoa(n)), 0o600)
}

// cutTorn drops a torn last line, as the gateway does when it opens a session.
func (s fileSession) cutTorn() int {
	path := filepath.Join(s.dir, "msgs.jsonl")
	data, _ := os.ReadFile(path)
	keep := bytes.LastIndexByte(data, '\n') + 1
	os.Truncate(path, int64(keep))
	return bytes.Count(data[:keep], []byte("\n"))
}

// TestKillChild is the process that TestKill9 kills: it appends messages
// and consolidates them until killed.
func TestKillChild(t *testing.T) {
	dir := os.Getenv("NB_MEMORY_KILL_DIR")
	if dir == "" {
		t.Skip("run by TestKill9")
	}
	s := fileSession{dir}
	n := s.cutTorn()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	c := &Consolidator{Workspace: dir, Window: 8, Timeout: time.Second,
		Open: func(context.Context, string) (Session, error) { return s, nil },
		Model: modelcall.Func(func(_ context.Context, r modelcall.Request) (modelcall.Reply, error) {
			if rng.IntN(10) < 3 {
				return modelcall.Reply{}, fmt.Errorf("503")
			}
			ids := marker.FindAllString(r.User[bytes.Index([]byte(r.User), []byte("## Conversation")):], -1)
			b, _ := json.Marshal(map[string]string{"history_entry": fmt.Sprint(ids), "memory_update": "# Memory\n- " + ids[len(ids)-1] + "\n"})
			return modelcall.Reply{ToolCalls: []provider.ToolCall{{Name: "save_memory", Arguments: string(b)}}}, nil
		})}
	if err := c.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "msgs.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	for {
		for range 1 + rng.IntN(3) {
			b, _ := json.Marshal(Message{Role: "user", Content: fmt.Sprintf("m%06d", n), Timestamp: "2026-11-26T04:00:00"})
			f.Write(append(b, '\n'))
			n++
		}
		c.Consolidate(context.Background(), "k", false) //nolint:errcheck // failures are part of the test
	}
}

// TestKill9 kills a process that consolidates with SIGKILL at random
// moments, 20 times; after each, recovery leaves every message in the
// tail or in HISTORY.md exactly once.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 20 processes")
	}
	dir := memTempDir(t)
	rng := rand.New(rand.NewPCG(3, 4))
	s := fileSession{dir}
	for i := range 20 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$")
		cmd.Env = append(os.Environ(), "NB_MEMORY_KILL_DIR="+dir)
		before := fileLen(filepath.Join(dir, "msgs.jsonl"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Once it works (a loaded machine or the race detector may take a
		// while to start it), kill it at a random moment.
		for deadline := time.Now().Add(time.Minute); fileLen(filepath.Join(dir, "msgs.jsonl")) <= before; {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("the child wrote nothing in a minute")
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		c := &Consolidator{Workspace: dir, Window: 8, Open: func(context.Context, string) (Session, error) { return s, nil }}
		if err := c.Recover(context.Background()); err != nil {
			t.Fatalf("kill %d: recover: %v", i, err)
		}
		msgs, cursor, err := s.all()
		if err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		checkExactlyOnce(t, c, msgs, cursor)
		if i == 19 {
			t.Logf("%d messages, cursor %d", len(msgs), cursor)
			if cursor == 0 {
				t.Error("nothing was consolidated")
			}
		}
	}
}

func fileLen(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
