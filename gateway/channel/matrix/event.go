package matrix

import (
	"encoding/json"
	"strings"
)

// The client-server API's shapes the channel reads and writes: only the
// fields it uses.

// Event and message types, message types and relations the channel knows.
const (
	typeMessage    = "m.room.message"
	typeEncrypted  = "m.room.encrypted"
	typeMember     = "m.room.member"
	typeEncryption = "m.room.encryption"

	msgText   = "m.text"
	msgNotice = "m.notice"
	msgImage  = "m.image"
	msgFile   = "m.file"
	msgAudio  = "m.audio"
	msgVideo  = "m.video"

	formatHTML = "org.matrix.custom.html"
	relReplace = "m.replace"
)

// clientEvent is a room event as /sync and /messages give it.
type clientEvent struct {
	Type      string          `json:"type"`
	ID        string          `json:"event_id"`
	Sender    string          `json:"sender"`
	RoomID    string          `json:"room_id,omitempty"`
	StateKey  *string         `json:"state_key,omitempty"`
	Timestamp int64           `json:"origin_server_ts"`
	Content   json.RawMessage `json:"content"`
}

// eventList is the {"events": [...]} of a sync's sections.
type eventList struct {
	Events []*clientEvent `json:"events"`
}

// syncResponse is GET /sync's answer.
type syncResponse struct {
	NextBatch string `json:"next_batch"`
	Rooms     struct {
		Join   map[string]*joinedRoom     `json:"join"`
		Invite map[string]*invitedRoom    `json:"invite"`
		Leave  map[string]json.RawMessage `json:"leave"`
	} `json:"rooms"`
}

// joinedRoom is a joined room's part of a sync.
type joinedRoom struct {
	Summary struct {
		JoinedMemberCount *int `json:"m.joined_member_count"`
	} `json:"summary"`
	State    eventList `json:"state"`
	Timeline struct {
		Events    []*clientEvent `json:"events"`
		Limited   bool           `json:"limited"`
		PrevBatch string         `json:"prev_batch"`
	} `json:"timeline"`
}

// invitedRoom is an invitation: the room's stripped state.
type invitedRoom struct {
	State eventList `json:"invite_state"`
}

// messagesResponse is GET /rooms/{roomId}/messages's answer.
type messagesResponse struct {
	Chunk []*clientEvent `json:"chunk"`
	End   string         `json:"end"`
}

// mentions is m.mentions (intentional mentions).
type mentions struct {
	UserIDs []string `json:"user_ids,omitempty"`
	Room    bool     `json:"room,omitempty"`
}

// add appends a user once.
func (m *mentions) add(user string) {
	for _, u := range m.UserIDs {
		if u == user {
			return
		}
	}
	m.UserIDs = append(m.UserIDs, user)
}

// relatesTo is m.relates_to: an edit's target, or the event replied to.
type relatesTo struct {
	Type      string     `json:"rel_type,omitempty"`
	EventID   string     `json:"event_id,omitempty"`
	InReplyTo *inReplyTo `json:"m.in_reply_to,omitempty"`
}

type inReplyTo struct {
	EventID string `json:"event_id,omitempty"`
}

// fileInfo is a media message's info.
type fileInfo struct {
	MimeType string `json:"mimetype,omitempty"`
	Size     int64  `json:"size,omitempty"`
}

// messageContent is an m.room.message's content.
type messageContent struct {
	MsgType       string          `json:"msgtype"`
	Body          string          `json:"body"`
	Format        string          `json:"format,omitempty"`
	FormattedBody string          `json:"formatted_body,omitempty"`
	URL           string          `json:"url,omitempty"`
	FileName      string          `json:"filename,omitempty"`
	Info          *fileInfo       `json:"info,omitempty"`
	File          json.RawMessage `json:"file,omitempty"`
	Mentions      *mentions       `json:"m.mentions,omitempty"`
	NewContent    *messageContent `json:"m.new_content,omitempty"`
	RelatesTo     *relatesTo      `json:"m.relates_to,omitempty"`
}

// parseMXC splits an mxc://server/media-id URI.
func parseMXC(uri string) (server, mediaID string, ok bool) {
	rest, ok := strings.CutPrefix(uri, "mxc://")
	if !ok {
		return "", "", false
	}
	server, mediaID, ok = strings.Cut(rest, "/")
	if !ok || server == "" || mediaID == "" || strings.Contains(mediaID, "/") {
		return "", "", false
	}
	return server, mediaID, true
}
