package channel

import (
	"context"
	"sync"
	"time"
)

// AccessToken is a platform's short-lived access token (Feishu's tenant
// token, DingTalk's and QQ's app tokens): fetched when first needed,
// fetched again Margin before it expires or after Forget, one fetch at a
// time. Its zero value needs Fetch.
type AccessToken struct {
	// Fetch asks the platform for a token and how long it lives.
	Fetch func(ctx context.Context) (token string, life time.Duration, err error)
	// Margin is how long before its expiry a token is replaced.
	Margin time.Duration
	// KeepOnFailure answers with the token held, while it has not
	// expired, when fetching its replacement fails (the platform hands
	// out new tokens only in the last part of the old one's life).
	KeepOnFailure bool

	mu      sync.Mutex
	token   string
	expires time.Time
}

// Get returns a token that has more than Margin left, fetching one when
// needed.
func (t *AccessToken) Get(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && time.Until(t.expires) > t.Margin {
		return t.token, nil
	}
	tok, life, err := t.Fetch(ctx)
	if err != nil {
		if t.KeepOnFailure && t.token != "" && time.Now().Before(t.expires) {
			return t.token, nil
		}
		return "", err
	}
	t.token, t.expires = tok, time.Now().Add(life)
	return tok, nil
}

// Forget drops token after the platform refused it, so the next Get
// fetches another; "" drops whatever token is held. A token fetched since
// (by another call) is kept.
func (t *AccessToken) Forget(token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if token == "" || t.token == token {
		t.token = ""
	}
}
