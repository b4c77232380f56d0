package anthropic_test

import (
	"net/http"

	"github.com/nbots/nb/provider/providertest"
)

// rawStream answers every request with a recorded event stream, written in
// pieces of 5 bytes.
type rawStream string

func (s rawStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	providertest.WriteSplit(w, string(s), 5)
}
