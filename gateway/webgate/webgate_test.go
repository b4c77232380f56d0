package webgate

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// A question posted by a run that died without withdrawing it (kill -9)
// is void: the web chat does not show it, and the chat's messages go to
// the assistant again.
func TestQuestionOfADeadRun(t *testing.T) {
	dir := t.TempDir()
	c := &Channel{Dir: dir}
	withdraw, err := c.Post(context.Background(), "me", "Deploy?")
	if err != nil {
		t.Fatal(err)
	}
	b := &Board{Dir: dir}
	if q, ok := b.Pending("me"); !ok || q != "Deploy?" {
		t.Fatalf("Pending = %q, %v", q, ok)
	}
	if taken, err := b.Answer("me", "yes", time.Now()); err != nil || !taken {
		t.Fatalf("Answer = %v, %v", taken, err)
	}
	withdraw()
	if _, ok := b.Pending("me"); ok {
		t.Fatal("a withdrawn question is still pending")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true command:", err)
	}
	if err := write(dir, askName("me"), note{Chat: "me", Content: "Deploy?", At: time.Now(), PID: cmd.Process.Pid}); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Pending("me"); ok {
		t.Fatal("the question of a run that died is pending")
	}
	if taken, _ := b.Answer("me", "hello", time.Now()); taken {
		t.Fatal("a message went to a run that died")
	}
}
