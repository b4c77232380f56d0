package channel

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
)
