// Package matrixtest is a Matrix homeserver's client-server API for tests,
// written from the specification (https://spec.matrix.org/latest/
// client-server-api/): the same paths under /_matrix/client/v3, the same
// JSON shapes (a /sync response's next_batch, rooms.join.<id>.timeline
// with limited and prev_batch, rooms.invite.<id>.invite_state, the room
// summary), the standard error body {"errcode":…,"error":…} with
// M_LIMIT_EXCEEDED's retry_after_ms, send transaction ids that make a
// repeated PUT return the first event, /messages paging back to a sync
// token, authenticated media downloads and uploads. Tests make people create
// rooms, invite the bot and write, read what the bot sent, and inject
// failures: connection resets, 5xx, syncs that hang, 429s per room.
package matrixtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/channel/channeltest"
)

// Event is a room event as the client-server API serialises it (a
// ClientEvent; room_id is left out inside /sync).
type Event struct {
	Type           string         `json:"type"`
	EventID        string         `json:"event_id"`
	Sender         string         `json:"sender"`
	OriginServerTS int64          `json:"origin_server_ts"`
	StateKey       *string        `json:"state_key,omitempty"`
	Content        map[string]any `json:"content"`
	RoomID         string         `json:"room_id,omitempty"`
	Unsigned       map[string]any `json:"unsigned,omitempty"`
}

type entry struct {
	pos  int64
	room string
	ev   Event
	txn  string // the sender's transaction id (the bot's sends)
}

type room struct {
	id         string
	members    map[string]string // user id -> membership
	joinedAt   map[string]int64  // user id -> the stream position of the join
	inviter    map[string]string // invitee -> who invited
	invitedAt  map[string]int64
	encrypted  bool
	public     bool
	limitsLeft int
	limitAfter time.Duration
}

// Server is a fake homeserver on a loopback port.
type Server struct {
	// URL is the homeserver to give the channel.
	URL string
	// Name is the server name in user and room ids ("fake.test").
	Name string
	// Bot is the bot account's user id.
	Bot string
	// Token is the only access token it accepts.
	Token string

	srv *channeltest.Loopback
	// Faults counts the requests by endpoint ("sync", "send", "join",
	// "whoami", "messages", "typing", "joined_members", "download",
	// "upload") and answers the ones injected: a reset connection, a proxy's HTML 502 page (a homeserver
	// behind a reverse proxy while it restarts), a request left hanging,
	// a 429 M_LIMIT_EXCEEDED with retry_after_ms 1000, or the request
	// carried out and its answer lost (a send the client must repeat with
	// the same transaction id).
	channeltest.Faults

	mu       sync.Mutex
	changed  chan struct{}
	stream   []entry
	rooms    map[string]*room
	txns     map[string]string // access token + txn id -> event id
	media    map[string][]byte
	uploaded map[string]Uploaded
	typing   map[string]int
	nextID   int
}

// New starts a server for token on 127.0.0.1.
func New(token string) (*Server, error) {
	s := &Server{
		Name:     "fake.test",
		Bot:      "@nb:fake.test",
		Token:    token,
		changed:  make(chan struct{}),
		rooms:    map[string]*room{},
		txns:     map[string]string{},
		media:    map[string][]byte{},
		uploaded: map[string]Uploaded{},
		typing:   map[string]int{},
	}
	srv, err := channeltest.NewLoopback(s, token)
	if err != nil {
		return nil, err
	}
	s.srv, s.URL = srv, srv.URL
	return s, nil
}

// Requests are the requests received so far ("GET /_matrix/client/v3/sync").
func (s *Server) Requests() []string { return s.srv.Requests() }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) id(prefix string) string {
	s.nextID++
	return fmt.Sprintf("%s%d", prefix, s.nextID)
}

// appendLocked adds an event to the room's timeline and returns its id.
func (s *Server) appendLocked(r *room, ev Event, txn string) string {
	ev.EventID = "$" + s.id("ev") + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	if ev.OriginServerTS == 0 {
		ev.OriginServerTS = time.Now().UnixMilli()
	}
	if ev.Content == nil {
		ev.Content = map[string]any{}
	}
	s.stream = append(s.stream, entry{pos: int64(len(s.stream) + 1), room: r.id, ev: ev, txn: txn})
	s.notify()
	return ev.EventID
}

func (s *Server) member(r *room, sender, target, membership string) {
	key := target
	pos := int64(len(s.stream) + 1)
	r.members[target] = membership
	switch membership {
	case "join":
		r.joinedAt[target] = pos
	case "invite":
		r.inviter[target] = sender
		r.invitedAt[target] = pos
	}
	s.appendLocked(r, Event{Type: "m.room.member", Sender: sender, StateKey: &key, Content: map[string]any{"membership": membership}}, "")
}

// RoomOptions shape a room.
type RoomOptions struct {
	// Members join the room after its creator.
	Members []string
	// Encrypted turns end-to-end encryption on (an m.room.encryption
	// state event).
	Encrypted bool
	// Public lets anyone join without an invitation.
	Public bool
}

// CreateRoom makes creator create a room (the bot is not in it) and
// returns its id.
func (s *Server) CreateRoom(creator string, o RoomOptions) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &room{id: "!" + s.id("room") + ":" + s.Name, members: map[string]string{}, joinedAt: map[string]int64{}, inviter: map[string]string{}, invitedAt: map[string]int64{}, encrypted: o.Encrypted, public: o.Public}
	s.rooms[r.id] = r
	empty := ""
	s.appendLocked(r, Event{Type: "m.room.create", Sender: creator, StateKey: &empty, Content: map[string]any{"creator": creator, "room_version": "11"}}, "")
	s.member(r, creator, creator, "join")
	if o.Encrypted {
		s.appendLocked(r, Event{Type: "m.room.encryption", Sender: creator, StateKey: &empty, Content: map[string]any{"algorithm": "m.megolm.v1.aes-sha2"}}, "")
	}
	for _, m := range o.Members {
		s.member(r, m, m, "join")
	}
	return r.id
}

// Invite makes inviter invite invitee into the room.
func (s *Server) Invite(roomID, inviter, invitee string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rooms[roomID]; r != nil {
		s.member(r, inviter, invitee, "invite")
	}
}

// Join makes user join the room.
func (s *Server) Join(roomID, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rooms[roomID]; r != nil {
		s.member(r, user, user, "join")
	}
}

// DirectRoom is a room user creates and invites the bot to: a direct chat.
func (s *Server) DirectRoom(user string) string {
	id := s.CreateRoom(user, RoomOptions{})
	s.Invite(id, user, s.Bot)
	return id
}

// Say makes sender write body (m.text) in the room and returns the event id.
func (s *Server) Say(roomID, sender, body string) string {
	return s.Post(roomID, sender, "m.room.message", map[string]any{"msgtype": "m.text", "body": body})
}

// Post makes sender send an event of the type with content.
func (s *Server) Post(roomID, sender, typ string, content map[string]any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[roomID]
	if r == nil {
		panic("matrixtest: no room " + roomID)
	}
	return s.appendLocked(r, Event{Type: typ, Sender: sender, Content: content}, "")
}

// Joined reports whether the bot is in the room.
func (s *Server) Joined(roomID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[roomID]
	return r != nil && r.members[s.Bot] == "join"
}

// Sent returns the events the bot sent in the room, in order.
func (s *Server) Sent(roomID string) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for _, e := range s.stream {
		if e.room == roomID && e.ev.Sender == s.Bot && e.ev.Type != "m.room.member" {
			out = append(out, e.ev)
		}
	}
	return out
}

// Texts returns the bodies of the bot's messages in the room as a client
// shows them: edits (m.replace) applied to the message they replace and
// not shown themselves.
func (s *Server) Texts(roomID string) []string {
	var out []string
	index := map[string]int{}
	for _, e := range s.Sent(roomID) {
		if e.Type != "m.room.message" {
			continue
		}
		if rel, _ := e.Content["m.relates_to"].(map[string]any); rel != nil && rel["rel_type"] == "m.replace" {
			if i, ok := index[fmt.Sprint(rel["event_id"])]; ok {
				if nc, _ := e.Content["m.new_content"].(map[string]any); nc != nil {
					out[i] = fmt.Sprint(nc["body"])
				}
			}
			continue
		}
		index[e.EventID] = len(out)
		out = append(out, fmt.Sprint(e.Content["body"]))
	}
	return out
}

// WaitSent waits until the bot has sent n messages in the room.
func (s *Server) WaitSent(ctx context.Context, roomID string, n int) ([]Event, error) {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if got := s.Sent(roomID); len(got) >= n {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return s.Sent(roomID), fmt.Errorf("room %s: fewer than %d messages: %w", roomID, n, ctx.Err())
		case <-ch:
		}
	}
}

// AddMedia stores content and returns its mxc:// URI.
func (s *Server) AddMedia(content []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.id("media")
	s.media[id] = content
	return "mxc://" + s.Name + "/" + id
}

// Limit makes the next n sends into the room fail with 429
// M_LIMIT_EXCEEDED and retry_after_ms of after.
func (s *Server) Limit(roomID string, n int, after time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rooms[roomID]; r != nil {
		r.limitsLeft, r.limitAfter = n, after
	}
}

// Kick removes the bot from the room.
func (s *Server) Kick(roomID, by string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rooms[roomID]; r != nil {
		s.member(r, by, s.Bot, "leave")
	}
}

// ServeHTTP routes the client-server API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const client, media = "/_matrix/client/v3/", "/_matrix/client/v1/media/download/"
	var parts []string
	var endpoint string
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/_matrix/media/v3/upload":
		endpoint = "upload"
	case strings.HasPrefix(r.URL.Path, media):
		endpoint, parts = "download", strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), media), "/")
	case strings.HasPrefix(r.URL.Path, client):
		parts = strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), client), "/")
		endpoint = route(r.Method, parts)
	default:
		writeError(w, http.StatusNotFound, "M_UNRECOGNIZED", "Unrecognized request")
		return
	}
	for i, p := range parts {
		parts[i], _ = unescape(p)
	}
	if endpoint == "" {
		writeError(w, http.StatusNotFound, "M_UNRECOGNIZED", "Unrecognized request")
		return
	}
	if !s.authorized(w, r) {
		return
	}
	s.Serve(w, r, endpoint, homeserverAnswers, func(w http.ResponseWriter) { s.serve(w, r, endpoint, parts) })
}

// homeserverAnswers are a reverse proxy's HTML 502 page and the
// homeserver's M_LIMIT_EXCEEDED.
var homeserverAnswers = channeltest.Answers{
	BadGateway: func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center></body></html>\n")
	},
	TooMany: func(w http.ResponseWriter) { tooMany(w, time.Second) },
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, endpoint string, parts []string) {
	switch endpoint {
	case "whoami":
		writeJSON(w, http.StatusOK, map[string]any{"user_id": s.Bot, "device_id": "NBFAKEDEVICE", "is_guest": false})
	case "sync":
		s.sync(w, r)
	case "join":
		s.join(w, parts)
	case "send":
		s.send(w, r, parts)
	case "typing":
		s.mu.Lock()
		s.typing[parts[1]]++
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{})
	case "joined_members":
		s.joinedMembers(w, parts[1])
	case "messages":
		s.messages(w, r, parts[1])
	case "download":
		s.download(w, parts)
	case "upload":
		s.upload(w, r)
	}
}

// unescape decodes a path segment (room ids are percent-encoded: they
// hold '!' and ':').
func unescape(p string) (string, error) {
	u, err := url.PathUnescape(p)
	if err != nil {
		return p, err
	}
	return u, nil
}

// route names the endpoint of a path under /_matrix/client/v3/.
func route(method string, p []string) string {
	switch {
	case method == http.MethodGet && len(p) == 2 && p[0] == "account" && p[1] == "whoami":
		return "whoami"
	case method == http.MethodGet && len(p) == 1 && p[0] == "sync":
		return "sync"
	case method == http.MethodPost && len(p) == 2 && p[0] == "join":
		return "join"
	case method == http.MethodPost && len(p) == 3 && p[0] == "rooms" && p[2] == "join":
		return "join"
	case method == http.MethodPut && len(p) == 5 && p[0] == "rooms" && p[2] == "send":
		return "send"
	case method == http.MethodPut && len(p) == 4 && p[0] == "rooms" && p[2] == "typing":
		return "typing"
	case method == http.MethodGet && len(p) == 3 && p[0] == "rooms" && p[2] == "joined_members":
		return "joined_members"
	case method == http.MethodGet && len(p) == 3 && p[0] == "rooms" && p[2] == "messages":
		return "messages"
	}
	return ""
}

// authorized checks the access token: in the Authorization header, or the
// deprecated access_token query parameter.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		tok = r.URL.Query().Get("access_token")
	}
	switch {
	case tok == "":
		writeError(w, http.StatusUnauthorized, "M_MISSING_TOKEN", "Missing access token")
		return false
	case tok != s.Token:
		writeJSON(w, http.StatusUnauthorized, map[string]any{"errcode": "M_UNKNOWN_TOKEN", "error": "Invalid access token passed.", "soft_logout": false})
		return false
	}
	return true
}

func tooMany(w http.ResponseWriter, after time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int((after+time.Second-1)/time.Second)))
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms": after.Milliseconds()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client reads what it gets
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"errcode": code, "error": msg})
}

func token(pos int64) string { return "s" + strconv.FormatInt(pos, 10) }

func parseToken(t string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(t, "s"), 10, 64)
	return n, err == nil && strings.HasPrefix(t, "s") && n >= 0
}

// tokenParam reads the stream token in the query parameter (def when
// absent), answering 400 M_INVALID_PARAM when it is not one.
func tokenParam(w http.ResponseWriter, q url.Values, name string, def int64) (int64, bool) {
	t := q.Get(name)
	if t == "" {
		return def, true
	}
	n, ok := parseToken(t)
	if !ok {
		writeError(w, http.StatusBadRequest, "M_INVALID_PARAM", "Invalid "+name+" token")
	}
	return n, ok
}

// timelineLimit reads room.timeline.limit from an inline filter (the
// filter parameter may be a JSON object instead of a filter id); 10 is
// what homeservers default to.
func timelineLimit(filter string) int {
	var f struct {
		Room struct {
			Timeline struct {
				Limit int `json:"limit"`
			} `json:"timeline"`
		} `json:"room"`
	}
	if strings.HasPrefix(filter, "{") && json.Unmarshal([]byte(filter), &f) == nil && f.Room.Timeline.Limit > 0 {
		return f.Room.Timeline.Limit
	}
	return 10
}

func (s *Server) sync(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, ok := tokenParam(w, q, "since", 0)
	if !ok {
		return
	}
	timeout := 0
	if t := q.Get("timeout"); t != "" {
		var err error
		if timeout, err = strconv.Atoi(t); err != nil || timeout < 0 {
			writeError(w, http.StatusBadRequest, "M_INVALID_PARAM", "timeout is not a number of milliseconds")
			return
		}
	}
	limit := timelineLimit(q.Get("filter"))
	deadline := time.NewTimer(time.Duration(timeout) * time.Millisecond)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		resp, has := s.syncLocked(since, q.Has("since"), limit)
		ch := s.changed
		s.mu.Unlock()
		if has || timeout == 0 || !q.Has("since") {
			writeJSON(w, http.StatusOK, resp)
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			writeJSON(w, http.StatusOK, resp)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// syncLocked builds the response for a client at since (an initial sync
// when incremental is false): the bot's joined rooms with the events it
// may see, and its pending invitations.
func (s *Server) syncLocked(since int64, incremental bool, limit int) (map[string]any, bool) {
	join := map[string]any{}
	invite := map[string]any{}
	ids := make([]string, 0, len(s.rooms))
	for id := range s.rooms {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		rm := s.rooms[id]
		switch rm.members[s.Bot] {
		case "invite":
			if !incremental || rm.invitedAt[s.Bot] > since {
				invite[id] = map[string]any{"invite_state": map[string]any{"events": s.strippedStateLocked(rm)}}
			}
		case "join":
			var evs []entry
			for _, e := range s.stream {
				if e.room == id && e.pos >= rm.joinedAt[s.Bot] && (!incremental || e.pos > since) {
					evs = append(evs, e)
				}
			}
			if incremental && len(evs) == 0 {
				continue
			}
			limited := len(evs) > limit
			if limited {
				evs = evs[len(evs)-limit:]
			}
			timeline := map[string]any{"events": s.clientEvents(evs, false), "limited": limited}
			if len(evs) > 0 {
				timeline["prev_batch"] = token(evs[0].pos - 1)
			}
			joined, invited := 0, 0
			for _, m := range rm.members {
				switch m {
				case "join":
					joined++
				case "invite":
					invited++
				}
			}
			join[id] = map[string]any{
				"timeline":             timeline,
				"state":                map[string]any{"events": []any{}},
				"ephemeral":            map[string]any{"events": []any{}},
				"account_data":         map[string]any{"events": []any{}},
				"summary":              map[string]any{"m.joined_member_count": joined, "m.invited_member_count": invited},
				"unread_notifications": map[string]any{"highlight_count": 0, "notification_count": 0},
			}
		}
	}
	rooms := map[string]any{}
	if len(join) > 0 {
		rooms["join"] = join
	}
	if len(invite) > 0 {
		rooms["invite"] = invite
	}
	resp := map[string]any{"next_batch": token(int64(len(s.stream)))}
	if len(rooms) > 0 {
		resp["rooms"] = rooms
	}
	return resp, len(rooms) > 0
}

// strippedStateLocked is an invited room's stripped state: the create
// event, the name and encryption if any, and the bot's invitation.
func (s *Server) strippedStateLocked(rm *room) []any {
	var out []any
	for _, e := range s.stream {
		if e.room != rm.id || e.ev.StateKey == nil {
			continue
		}
		if e.ev.Type == "m.room.create" || e.ev.Type == "m.room.encryption" || e.ev.Type == "m.room.name" ||
			(e.ev.Type == "m.room.member" && *e.ev.StateKey == s.Bot && e.pos == rm.invitedAt[s.Bot]) {
			out = append(out, map[string]any{"type": e.ev.Type, "state_key": *e.ev.StateKey, "sender": e.ev.Sender, "content": e.ev.Content})
		}
	}
	return out
}

// clientEvents serialises entries; the bot's own events carry their
// transaction id in unsigned, as the spec has it for the sending device.
func (s *Server) clientEvents(es []entry, withRoom bool) []Event {
	out := make([]Event, 0, len(es))
	for _, e := range es {
		ev := e.ev
		if withRoom {
			ev.RoomID = e.room
		}
		if e.txn != "" {
			ev.Unsigned = map[string]any{"transaction_id": e.txn}
		}
		out = append(out, ev)
	}
	return out
}

func (s *Server) join(w http.ResponseWriter, parts []string) {
	id := parts[1]
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.rooms[id]
	if rm == nil {
		writeError(w, http.StatusNotFound, "M_NOT_FOUND", "No known servers")
		return
	}
	switch {
	case rm.members[s.Bot] == "join":
	case rm.members[s.Bot] == "invite" || rm.public:
		s.member(rm, s.Bot, s.Bot, "join")
	default:
		writeError(w, http.StatusForbidden, "M_FORBIDDEN", "You are not invited to this room.")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"room_id": id})
}

func (s *Server) send(w http.ResponseWriter, r *http.Request, parts []string) {
	roomID, typ, txn := parts[1], parts[3], parts[4]
	var content map[string]any
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 65536)).Decode(&content); err != nil {
		if strings.Contains(err.Error(), "too large") {
			writeError(w, http.StatusRequestEntityTooLarge, "M_TOO_LARGE", "event too large")
			return
		}
		writeError(w, http.StatusBadRequest, "M_NOT_JSON", "Content not JSON.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.rooms[roomID]
	if rm == nil || rm.members[s.Bot] != "join" {
		writeError(w, http.StatusForbidden, "M_FORBIDDEN", fmt.Sprintf("User %s not in room %s", s.Bot, roomID))
		return
	}
	if id, ok := s.txns[s.Token+"\x00"+txn]; ok {
		writeJSON(w, http.StatusOK, map[string]any{"event_id": id})
		return
	}
	if rm.limitsLeft > 0 {
		rm.limitsLeft--
		tooMany(w, rm.limitAfter)
		return
	}
	if typ == "m.room.message" {
		if _, ok := content["msgtype"].(string); !ok {
			writeError(w, http.StatusBadRequest, "M_BAD_JSON", "m.room.message without msgtype")
			return
		}
		if _, ok := content["body"].(string); !ok {
			writeError(w, http.StatusBadRequest, "M_BAD_JSON", "m.room.message without body")
			return
		}
	}
	id := s.appendLocked(rm, Event{Type: typ, Sender: s.Bot, Content: content}, txn)
	s.txns[s.Token+"\x00"+txn] = id
	writeJSON(w, http.StatusOK, map[string]any{"event_id": id})
}

func (s *Server) joinedMembers(w http.ResponseWriter, roomID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.rooms[roomID]
	if rm == nil || rm.members[s.Bot] != "join" {
		writeError(w, http.StatusForbidden, "M_FORBIDDEN", "You aren't a member of the room.")
		return
	}
	joined := map[string]any{}
	for u, m := range rm.members {
		if m == "join" {
			joined[u] = map[string]any{"display_name": strings.TrimPrefix(strings.Split(u, ":")[0], "@"), "avatar_url": nil}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"joined": joined})
}

// messages pages a room's timeline: dir=b goes back from the from token
// (events at or before it) and stops at the to token (exclusive).
func (s *Server) messages(w http.ResponseWriter, r *http.Request, roomID string) {
	q := r.URL.Query()
	if q.Get("dir") != "b" && q.Get("dir") != "f" {
		writeError(w, http.StatusBadRequest, "M_INVALID_PARAM", "dir must be b or f")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.rooms[roomID]
	if rm == nil || rm.members[s.Bot] != "join" {
		writeError(w, http.StatusForbidden, "M_FORBIDDEN", "You aren't a member of the room.")
		return
	}
	from, ok := tokenParam(w, q, "from", int64(len(s.stream)))
	if !ok {
		return
	}
	to, ok := tokenParam(w, q, "to", -1)
	if !ok {
		return
	}
	limit := 10
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 {
		limit = min(l, 1000)
	}
	var chunk []entry
	end := int64(-1)
	if q.Get("dir") == "b" {
		for i := len(s.stream) - 1; i >= 0; i-- {
			e := s.stream[i]
			if e.pos > from || e.room != roomID || e.pos < rm.joinedAt[s.Bot] {
				continue
			}
			if to >= 0 && e.pos <= to {
				break
			}
			if len(chunk) == limit {
				end = chunk[len(chunk)-1].pos - 1
				break
			}
			chunk = append(chunk, e)
		}
	} else {
		for _, e := range s.stream {
			if e.pos <= from || e.room != roomID || e.pos < rm.joinedAt[s.Bot] {
				continue
			}
			if to >= 0 && e.pos > to {
				break
			}
			if len(chunk) == limit {
				end = chunk[len(chunk)-1].pos
				break
			}
			chunk = append(chunk, e)
		}
	}
	resp := map[string]any{"start": token(from), "chunk": s.clientEvents(chunk, true)}
	if end >= 0 {
		resp["end"] = token(end)
	}
	writeJSON(w, http.StatusOK, resp)
}

// MaxUploadBytes is the fake's m.upload.size (Synapse's default, 50 MiB).
const MaxUploadBytes = 50 << 20

// upload stores a file (POST /_matrix/media/v3/upload?filename=…) and
// answers its content_uri.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxUploadBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "M_TOO_LARGE", "Cannot upload files larger than 50M")
		return
	}
	uri := s.AddMedia(b)
	s.mu.Lock()
	s.uploaded[uri] = Uploaded{Name: r.URL.Query().Get("filename"), Type: r.Header.Get("Content-Type"), Data: b}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"content_uri": uri})
}

// Uploaded is a file the bot uploaded.
type Uploaded struct {
	Name, Type string
	Data       []byte
}

// Upload is what the bot uploaded at the mxc:// URI.
func (s *Server) Upload(uri string) (Uploaded, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.uploaded[uri]
	return u, ok
}

func (s *Server) download(w http.ResponseWriter, parts []string) {
	if len(parts) < 2 || parts[0] != s.Name {
		writeError(w, http.StatusNotFound, "M_NOT_FOUND", "Not found")
		return
	}
	s.mu.Lock()
	b, ok := s.media[parts[1]]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "M_NOT_FOUND", "Not found")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b) //nolint:errcheck // the client reads what it gets
}
