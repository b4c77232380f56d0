package matrix

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestClientRequests: paths escape each segment (an event type or a
// transaction id with '/' stays one segment), the token travels only in
// the Authorization header, and answers other than 2xx become apiErrors
// with the standard error body when there is one.
func TestClientRequests(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.EscapedPath()+" "+r.URL.RawQuery+" "+r.Header.Get("Authorization"))
		switch {
		case strings.HasSuffix(r.URL.Path, "/typing/@bot:x.org"):
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		case strings.Contains(r.URL.Path, "/send/"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"errcode":"M_LIMIT_EXCEEDED","error":"slow down","retry_after_ms":1500}`))
		default:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("<html>502 Bad Gateway</html>"))
		}
	}))
	defer srv.Close()
	base, _ := url.Parse(srv.URL + "/prefix")
	c := newClient(base, "tok", srv.Client())
	ctx := context.Background()

	_, err := c.send(ctx, "!r:x.org", "m.room.message", "a/b c", map[string]any{"body": "hi"})
	if re := asAPIError(err); re == nil || re.Code != "M_LIMIT_EXCEEDED" || re.Message != "slow down" || !strings.Contains(err.Error(), "M_LIMIT_EXCEEDED") {
		t.Errorf("send: %v", err)
	}
	if d, ok := retryAfter(err, time.Second); !ok || d != 1500*time.Millisecond {
		t.Errorf("retry_after_ms: %v %v", d, ok)
	}
	err = c.typing(ctx, "!r:x.org", "@bot:x.org", 30*time.Second)
	if d, ok := retryAfter(err, time.Second); !ok || d != 7*time.Second {
		t.Errorf("Retry-After: %v %v (%v)", d, ok, err)
	}
	_, err = c.whoami(ctx)
	if re := asAPIError(err); re == nil || re.Status != http.StatusBadGateway || re.Code != "" || final(err) != nil {
		t.Errorf("whoami through a 502 page: %v", err)
	}
	_, err = c.sync(ctx, "s1", 0, `{"a":1}`)
	want := []string{
		"PUT /prefix/_matrix/client/v3/rooms/%21r:x.org/send/m.room.message/a%2Fb%20c  Bearer tok",
		"PUT /prefix/_matrix/client/v3/rooms/%21r:x.org/typing/@bot:x.org  Bearer tok",
		"GET /prefix/_matrix/client/v3/account/whoami  Bearer tok",
		"GET /prefix/_matrix/client/v3/sync filter=%7B%22a%22%3A1%7D&since=s1&timeout=0 Bearer tok",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err == nil || strings.Contains(err.Error(), "tok") {
		t.Errorf("sync: %v", err)
	}
}

// TestRetryAfterForms: a 429's Retry-After may be an HTTP-date, and
// neither it nor retry_after_ms can ask for more than maxRetryAfter.
func TestRetryAfterForms(t *testing.T) {
	limited := func(ms int64, header string) error {
		return &apiError{Method: "PUT", Path: "/x", Status: http.StatusTooManyRequests, Code: "M_LIMIT_EXCEEDED", RetryAfterMS: ms, RetryAfter: header}
	}
	if d, _ := retryAfter(limited(0, time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)), time.Second); d < 55*time.Second || d > time.Minute {
		t.Errorf("Retry-After as an HTTP-date a minute on: %v", d)
	}
	if d, _ := retryAfter(limited(1<<62, ""), time.Second); d != maxRetryAfter {
		t.Errorf("a huge retry_after_ms: %v, want %v", d, maxRetryAfter)
	}
	if d, _ := retryAfter(limited(0, "86400"), time.Second); d != maxRetryAfter {
		t.Errorf("a day's Retry-After: %v, want %v", d, maxRetryAfter)
	}
	if d, _ := retryAfter(limited(0, "-3"), 5*time.Second); d != 5*time.Second {
		t.Errorf("a negative Retry-After: %v, want the fallback", d)
	}
}
