package providertest

import (
	"encoding/json"
	"io"
	"net/http"
)

// WriteError answers with status and the error body, as JSON unless the
// fake set its own Content-Type first, with a Retry-After header when
// retryAfter is not empty.
func WriteError(w http.ResponseWriter, status int, body, retryAfter string) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	io.WriteString(w, body) //nolint:errcheck // client may have gone
}

// WriteReplyError answers with the reply's error status, when it has one
// (not 0 or 200), and reports whether it did. The body is the reply's
// ErrorBody, or else bodies[status]: the provider's documented error object.
func WriteReplyError(w http.ResponseWriter, reply Reply, bodies map[int]string) bool {
	if reply.Status == 0 || reply.Status == 200 {
		return false
	}
	b := reply.ErrorBody
	if b == "" {
		b = bodies[reply.Status]
	}
	WriteError(w, reply.Status, b, reply.RetryAfter)
	return true
}

// JSONString returns s as a JSON string literal, quotes included.
func JSONString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// SplitSize is the size of the pieces a fake writes streams in: n, or 7
// when n is not positive (a fake's SplitBytes left unset).
func SplitSize(n int) int {
	if n > 0 {
		return n
	}
	return 7
}

// WriteData writes one server-sent event holding data, in pieces of n
// bytes, so the frame arrives split across reads.
func WriteData(w http.ResponseWriter, data string, n int) {
	WriteSplit(w, "data: "+data+"\n\n", n)
}
