package openaiapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/state"
)

// keeper keeps the values of one kind for their owners: stored responses
// or the server's part of tool rounds. Without a shared store they stay
// in this process's memory; with one (Options.Shared) they are kept
// there, so that the request that continues a conversation (a
// previous_response_id, the results of the client's tool calls) may
// reach any replica: the exchange is run again from what was kept, by
// whichever replica receives it.
type keeper[V any] struct {
	kind   string
	lim    eventlog.Limits
	mem    *eventlog.Store[V]
	shared eventlog.Shared
	encode func(V) ([]byte, error)
	decode func([]byte) (V, error)
}

func newKeeper[V any](kind string, lim eventlog.Limits, now func() time.Time, shared eventlog.Shared, encode func(V) ([]byte, error), decode func([]byte) (V, error)) *keeper[V] {
	k := &keeper[V]{kind: kind, lim: lim, shared: shared, encode: encode, decode: decode}
	if shared == nil {
		k.mem = eventlog.NewStore[V](lim, now, nil)
	}
	return k
}

// put keeps v, size bytes large, and reports whether it was kept: not
// when it is larger than the whole store.
func (k *keeper[V]) put(ctx context.Context, id, owner string, v V, size int64) (bool, error) {
	if k.mem != nil {
		return k.mem.Put(id, owner, v, size), nil
	}
	if size > k.lim.Bytes {
		return false, nil
	}
	b, err := k.encode(v)
	if err != nil {
		return false, err
	}
	if err := k.shared.Put(ctx, k.kind, id, owner, b, k.lim); err != nil {
		return false, storeError(err)
	}
	return true, nil
}

// get returns the value id of owner, false when there is none.
func (k *keeper[V]) get(ctx context.Context, id, owner string) (V, bool, error) {
	if k.mem != nil {
		v, ok := k.mem.Get(id, owner)
		return v, ok, nil
	}
	var zero V
	b, err := k.shared.Get(ctx, k.kind, id, owner)
	if errors.Is(err, eventlog.ErrUnknown) {
		return zero, false, nil
	}
	if err != nil {
		return zero, false, storeError(err)
	}
	v, err := k.decode(b)
	if err != nil {
		return zero, false, &Error{Status: http.StatusInternalServerError, Type: "server_error",
			Message: "a " + k.kind + " kept in the shared store cannot be read: " + err.Error()}
	}
	return v, true, nil
}

// del forgets id if owner put it, and reports whether it was there.
func (k *keeper[V]) del(ctx context.Context, id, owner string) (bool, error) {
	if k.mem != nil {
		return k.mem.Delete(id, owner), nil
	}
	ok, err := k.shared.Delete(ctx, k.kind, id, owner)
	if err != nil {
		return false, storeError(err)
	}
	return ok, nil
}

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
