package botapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A 429's retry_after is the wait, capped, and a second when it names
// none: an absurd value (a broken or hostile server) neither overflows
// into a negative wait nor parks the chat for years.
func TestRetryAfter(t *testing.T) {
	for _, c := range []struct {
		retryAfter string
		want       time.Duration
	}{
		{`5`, 5 * time.Second},
		{`0`, time.Second},
		{`-3`, time.Second},
		{`99999999999`, maxRetryAfter},
		{`9223372036`, maxRetryAfter},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after %s","parameters":{"retry_after":%s}}`, c.retryAfter, c.retryAfter)
		}))
		_, err := (&Client{Base: srv.URL, Token: "1:t"}).SendMessage(context.Background(), SendMessage{ChatID: 1, Text: "hi"})
		srv.Close()
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("retry_after %s: %v, want an *Error", c.retryAfter, err)
		}
		if e.RetryAfter != c.want {
			t.Errorf("retry_after %s: wait %v, want %v", c.retryAfter, e.RetryAfter, c.want)
		}
	}
}
