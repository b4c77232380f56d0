package channel

import (
	"context"
	"testing"
)

// ctxCursor is a shared position that, like the bus's, gives up when its
// context ends.
type ctxCursor struct{ saved string }

func (c *ctxCursor) Load(context.Context) (string, error) { return c.saved, nil }
func (c *ctxCursor) String() string                       { return "test position" }
func (c *ctxCursor) Save(ctx context.Context, pos string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.saved = pos
	return nil
}

// A position is saved past a durable message even when the receive loop
// stopped just after publishing it (its context cancelled): lost, the
// replica elected next would read that message again and answer it twice
// (email's TestReplicasShareTheMailboxPosition failed so in CI).
func TestPositionSavedAfterTheLoopStopped(t *testing.T) {
	shared := &ctxCursor{}
	env := Env{StateDir: t.TempDir(), OpenPosition: func(context.Context, string, FileCursor) (Cursor, error) { return shared, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	c, err := env.Cursor(ctx, "email")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := c.Save(ctx, "7"); err != nil || shared.saved != "7" {
		t.Fatalf("save after the loop stopped: %v, position %q", err, shared.saved)
	}
}
