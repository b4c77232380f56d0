package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
)

// failingRunner fails every turn with err.
type failingRunner struct{ err error }

func (r failingRunner) Model() string { return "fake/failing" }
func (r failingRunner) Run(context.Context, Turn) (Answer, error) {
	return Answer{}, r.err
}

// A provider's error reaches the owner's chat as nanobot shows it, in the
// configuration's words; guests get nanobot's apology only.
func TestProviderErrorInTheChat(t *testing.T) {
	err := &provider.Error{Provider: "openai", Status: 401, Message: "Incorrect API key provided: sk-xx", Hint: "check provider.credentials.access-token"}
	words := strings.NewReplacer("provider.credentials.access-token", "providers.custom.apiKey").Replace
	h, _ := newHarnessWith(t, failingRunner{err}, func(g *Gateway) { g.Words = words })
	h.send(t, tg("hi"))
	want := "Error calling LLM: openai: HTTP 401 Unauthorized: Incorrect API key provided: sk-xx (check providers.custom.apiKey)"
	if got := h.next(t); got.Content != want {
		t.Fatalf("reply %q\nwant  %q", got.Content, want)
	}
	if got := h.g.failure(Direct{Role: ""}, err); got != errorReply {
		t.Fatalf("a guest was told %q", got)
	}
}
