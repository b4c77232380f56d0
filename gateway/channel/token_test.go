package channel

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestAccessToken(t *testing.T) {
	var fetches int
	var fail error
	life := time.Hour
	tok := &AccessToken{Margin: 10 * time.Minute, Fetch: func(context.Context) (string, time.Duration, error) {
		if fail != nil {
			return "", 0, fail
		}
		fetches++
		return string(rune('a' + fetches - 1)), life, nil
	}}
	ctx := context.Background()
	get := func(want string) {
		t.Helper()
		if got, err := tok.Get(ctx); err != nil || got != want {
			t.Fatalf("Get = %q, %v; want %q", got, err, want)
		}
	}
	get("a")
	get("a") // held while it has more than Margin left
	tok.Forget("zzz")
	get("a") // another token's refusal drops nothing
	tok.Forget("a")
	get("b")
	tok.Forget("")
	get("c")

	// Within the margin: a new one is fetched; a failed fetch is an error
	// unless KeepOnFailure, which answers with the one still valid.
	life = 5 * time.Minute
	tok.Forget("")
	get("d")
	fail = errors.New("refused")
	if _, err := tok.Get(ctx); err == nil {
		t.Fatal("a failed refresh gave a token without KeepOnFailure")
	}
	tok.KeepOnFailure = true
	get("d")
	tok.Forget("")
	if _, err := tok.Get(ctx); err == nil {
		t.Fatal("no token held, a failed fetch gave one")
	}
}

// Calls at once share one fetch.
func TestAccessTokenOneFetchAtATime(t *testing.T) {
	var mu sync.Mutex
	fetches := 0
	tok := &AccessToken{Fetch: func(context.Context) (string, time.Duration, error) {
		mu.Lock()
		fetches++
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		return "t", time.Hour, nil
	}}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { tok.Get(context.Background()) }) //nolint:errcheck // counted below
	}
	wg.Wait()
	if fetches != 1 {
		t.Fatalf("%d fetches for 20 calls at once", fetches)
	}
}
