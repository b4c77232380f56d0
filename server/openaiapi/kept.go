package openaiapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/nbots/nb/state"
)

// The responses and the server's part of tool rounds are kept by an
// eventlog.Keeper: without a shared store in this process's memory; with
// one (Options.Shared) there, so that the request that continues a
// conversation (a previous_response_id, the results of the client's tool
// calls) may reach any replica: the exchange is run again from what was
// kept, by whichever replica receives it.

// storeError is a failure of the shared store, in OpenAI's shape.
func storeError(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "store_unreachable", RetryAfter: time.Second,
		Message: "this server cannot reach the store it shares with its replicas: " + err.Error()}
}

// keptResponseJSON is a stored response in the shared store.
type keptResponseJSON struct {
	Conversation []state.Event   `json:"conversation"`
	Object       json.RawMessage `json:"object"`
}

func encodeResponse(r *storedResponse) ([]byte, error) {
	return json.Marshal(keptResponseJSON{Conversation: r.conversation, Object: r.object})
}

func decodeResponse(b []byte) (*storedResponse, error) {
	var k keptResponseJSON
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, err
	}
	return &storedResponse{conversation: k.Conversation, object: k.Object}, nil
}

func encodeRound(r *keptRound) ([]byte, error) { return json.Marshal(r.events) }

func decodeRound(b []byte) (*keptRound, error) {
	var events []state.Event
	if err := json.Unmarshal(b, &events); err != nil {
		return nil, err
	}
	return &keptRound{events: events}, nil
}
