package server

import (
	"context"
	"strings"
	"testing"

	"github.com/nbots/nb/bot"
)

// OwnerContext carries the owner's token, refuses an unknown owner, and
// holds what it leases only until release: a bot leased in it is closed
// once released (nothing it took over stays held for the server's life).
func TestOwnerContext(t *testing.T) {
	tok, _ := NewToken("team", strings.Repeat("t", 20))
	f := newFixture(t, nil, func(o *Options) { o.Tokens = []*Token{tok} })
	if _, _, err := f.srv.OwnerContext(context.Background(), "token:other"); err == nil {
		t.Error("an owner no token names was accepted")
	}
	ctx, release, err := f.srv.OwnerContext(context.Background(), "token:team")
	if err != nil {
		t.Fatal(err)
	}
	if got := Owner(ctx); got != "token:team" {
		t.Errorf("Owner = %q, want token:team", got)
	}
	closed := false
	if !leasesFrom(ctx).Adopt(&bot.Bot{}, func(error) { closed = true }) {
		t.Fatal("the context holds no leases")
	}
	if closed {
		t.Fatal("the bot was closed while held")
	}
	release()
	if !closed {
		t.Error("the bot leased in the owner's context was not closed after release")
	}
}
