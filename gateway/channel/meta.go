package channel

import (
	"encoding/json"
	"time"
)

// Metadata keys the gateway reads in bus.Inbound.Metadata: a channel sets
// them so that access rules apply in groups (answer when mentioned unless
// the channel's groupPolicy is open).
const (
	// MetaGroup (bool) is true for a message in a group chat or room.
	MetaGroup = "group"
	// MetaMentioned (bool) is true when the message mentions the bot (or
	// replies to it).
	MetaMentioned = "mentioned"
	// MetaStreamed (bool) marks a bus.Progress that is the answer so far:
	// delivered only by channels that edit messages (Capabilities.Edits).
	MetaStreamed = "_stream_delta"
	// MetaLiveAt (a number: Unix milliseconds) marks a streamed
	// bus.Progress that shows a running tool's output, and when it was
	// published: a dispatcher leaves it out once it is stale (a newer one,
	// or the answer, is on its way), so the edits follow the platform's
	// pace instead of queueing behind it.
	MetaLiveAt = "_live_at"
)

// LiveStale is how old a MetaLiveAt progress may be when its turn comes
// to be delivered.
const LiveStale = 2 * time.Second

// Stale reports whether meta (a bus.Progress's) marks a live-output
// progress older than LiveStale at now.
func Stale(meta map[string]any, now time.Time) bool {
	var ms int64
	switch v := meta[MetaLiveAt].(type) {
	case int64:
		ms = v
	case float64:
		ms = int64(v)
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return false
		}
		ms = n
	default:
		return false
	}
	return now.Sub(time.UnixMilli(ms)) > LiveStale
}
