// Package feishutest is a Feishu (Lark) open platform for tests, written
// from the platform's documentation of the server API and of event
// subscription, and from the long connection's frames as the official
// SDKs speak them:
//
//   - POST /open-apis/auth/v3/tenant_access_token/internal takes app_id
//     and app_secret and answers a tenant_access_token with its expire
//     (seconds); a request with a token it did not issue, or one past its
//     expiry, is answered code 99991663 / 99991677.
//   - POST /callback/ws/endpoint takes {"AppID","AppSecret"} and answers
//     {"code":0,"data":{"URL":"ws://…?device_id=…&service_id=…","ClientConfig":{…}}}.
//   - The websocket carries pbbp2 frames (binary, protobuf): the client
//     pings (method 0, header type=ping, its service id) and is answered
//     a pong with the ClientConfig as payload; events come as data frames
//     (method 1, headers type=event, message_id, sum, seq, trace_id) with
//     the event's JSON as payload, split in pieces when Split is set; the
//     client acknowledges by sending the frame back with the payload
//     {"code":200} and a biz_rt header. An event not acknowledged is sent
//     again on the next connection.
//   - im/v1/messages (create, with the uuid that makes a repeat a no-op),
//     its PATCH (cards only), reactions, resources (a message's images and
//     files), im/v1/images and im/v1/files (uploads), bot/v3/info.
//   - A chat takes five messages a second; past that, and for a fault
//     TooMany, HTTP 429 with code 99991400 and x-ogw-ratelimit-reset.
package feishutest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/feishu/pbbp2"
)

// BotOpenID is the bot's own open_id.
const BotOpenID = "ou_bot0000000000000000000000000000"

// Endpoints, for Inject and Calls.
const (
	EPToken    = "token"
	EPEndpoint = "endpoint"
	EPSend     = "send"
	EPPatch    = "patch"
	EPUpload   = "upload"
	EPResource = "resource"
	EPReaction = "reaction"
)

// Message is one the bot sent.
type Message struct {
	ID, ReceiveID, IDType, Type string
	// Content is the message's content JSON (text, post, card, image…).
	Content string
	Edits   int
}

// Text is the message's text as a person reads it: a text's text, a
// post's text elements, a card's markdown.
func (m Message) Text() string {
	var v struct {
		Text     string `json:"text"`
		Elements []struct {
			Content string `json:"content"`
		} `json:"elements"`
		ZhCN struct {
			Content [][]struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"zh_cn"`
	}
	json.Unmarshal([]byte(m.Content), &v) //nolint:errcheck // a test reads what it can
	var b strings.Builder
	b.WriteString(v.Text)
	for _, e := range v.Elements {
		b.WriteString(e.Content)
	}
	for i, p := range v.ZhCN.Content {
		if i > 0 {
			b.WriteString("\n")
		}
		for _, e := range p {
			b.WriteString(e.Text)
		}
	}
	return b.String()
}

// Incoming is a message a person sends.
type Incoming struct {
	// Sender is their open_id; Chat the group's chat_id ("" for a direct
	// chat with the bot).
	Sender, Chat string
	// Type is the message_type (text when ""); Content its content JSON
	// (built from Text when "").
	Type, Content, Text string
	// MentionBot puts the bot's mention placeholder before Text.
	MentionBot bool
	// Resources are the message's files and images by their keys,
	// downloadable from the moment the message is posted.
	Resources map[string][]byte
}

// Server is the fake platform.
type Server struct {
	channeltest.Faults
	URL string
	// AppID and AppSecret are the app's credentials.
	AppID, AppSecret string
	// TokenTTL is the expire of the tokens it issues (2 h when 0).
	TokenTTL time.Duration
	// PingInterval is the ClientConfig's (seconds; 120 when 0).
	PingInterval int
	// Split sends every event in three frames.
	Split bool

	hs *httptest.Server

	mu        sync.Mutex
	tokens    map[string]time.Time
	seq       int
	pending   []pendingEvent // sent, not acknowledged, in order
	conns     map[*websocket.Conn]bool
	closed    bool // Close was called: a socket accepted since is closed at once
	connected int
	pings     int
	acks      int
	sent      []Message
	uuids     map[string]string
	resources map[string][]byte // message_id/key → bytes
	lastSend  map[string][]time.Time
	reactions map[string]string
	uploads   []Upload
	changed   chan struct{}
}

type pendingEvent struct {
	id      string
	payload []byte
}

// New starts a fake platform for the app's credentials.
func New(appID, appSecret string) *Server {
	s := &Server{AppID: appID, AppSecret: appSecret, tokens: map[string]time.Time{}, conns: map[*websocket.Conn]bool{},
		uuids: map[string]string{}, resources: map[string][]byte{}, lastSend: map[string][]time.Time{}, reactions: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /open-apis/auth/v3/tenant_access_token/internal", s.token)
	mux.HandleFunc("POST /callback/ws/endpoint", s.endpoint)
	mux.HandleFunc("GET /ws", s.socket)
	mux.HandleFunc("GET /open-apis/bot/v3/info", s.authed("", func(w http.ResponseWriter, r *http.Request) {
		answer(w, 200, map[string]any{"code": 0, "msg": "ok", "bot": map[string]any{"open_id": BotOpenID, "app_name": "nb"}})
	}))
	mux.HandleFunc("POST /open-apis/im/v1/messages", s.authed(EPSend, s.send))
	mux.HandleFunc("PATCH /open-apis/im/v1/messages/{id}", s.authed(EPPatch, s.patch))
	mux.HandleFunc("POST /open-apis/im/v1/messages/{id}/reactions", s.authed(EPReaction, s.react))
	mux.HandleFunc("GET /open-apis/im/v1/messages/{id}/resources/{key}", s.authed(EPResource, s.resource))
	mux.HandleFunc("POST /open-apis/im/v1/images", s.authed(EPUpload, s.upload))
	mux.HandleFunc("POST /open-apis/im/v1/files", s.authed(EPUpload, s.upload))
	s.hs = httptest.NewServer(mux)
	s.URL = s.hs.URL
	return s
}

// Close stops the server. A long connection whose handshake ended
// before Close but which was not registered yet (the client may count
// itself connected from the handshake) is closed as it registers.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.Drop()
	s.hs.CloseClientConnections()
	s.hs.Close()
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client sees a broken answer
}

func fail(w http.ResponseWriter, status, code int, msg string) {
	answer(w, status, map[string]any{"code": code, "msg": msg})
}

func randID(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b) //nolint:errcheck // never fails
	return prefix + hex.EncodeToString(b)
}

func (s *Server) notify() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// fault answers an injected fault; it reports whether it did.
func (s *Server) fault(w http.ResponseWriter, ep string) bool {
	switch s.Next(ep) {
	case channeltest.Reset:
		channeltest.ResetConnection(w)
	case channeltest.BadGateway:
		http.Error(w, "bad gateway", http.StatusBadGateway)
	case channeltest.Hang:
		time.Sleep(40 * time.Second)
	case channeltest.TooMany:
		w.Header().Set("x-ogw-ratelimit-reset", "1")
		fail(w, http.StatusTooManyRequests, 99991400, "request trigger frequency limit")
	default:
		return false
	}
	return true
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, EPToken) {
		return
	}
	var in struct {
		AppID     string `json:"app_id"`
		AppSecret string `json:"app_secret"`
	}
	json.NewDecoder(r.Body).Decode(&in) //nolint:errcheck // checked below
	if in.AppID != s.AppID || in.AppSecret != s.AppSecret {
		fail(w, 400, 10014, "app secret invalid")
		return
	}
	ttl := s.TokenTTL
	if ttl == 0 {
		ttl = 2 * time.Hour
	}
	tok := randID("t-")
	s.mu.Lock()
	s.tokens[tok] = time.Now().Add(ttl)
	s.mu.Unlock()
	answer(w, 200, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": tok, "expire": int(ttl / time.Second)})
}

// ExpireTokens makes every token issued so far expired.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t := range s.tokens {
		s.tokens[t] = time.Now().Add(-time.Second)
	}
}

func (s *Server) authed(ep string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		s.mu.Lock()
		exp, ok := s.tokens[tok]
		s.mu.Unlock()
		if !ok {
			fail(w, 400, 99991663, "Invalid access token for authorization")
			return
		}
		if time.Now().After(exp) {
			fail(w, 400, 99991677, "token expired")
			return
		}
		if ep != "" && s.fault(w, ep) {
			return
		}
		h(w, r)
	}
}

func (s *Server) endpoint(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, EPEndpoint) {
		return
	}
	var in struct{ AppID, AppSecret string }
	json.NewDecoder(r.Body).Decode(&in) //nolint:errcheck // checked below
	if in.AppID != s.AppID || in.AppSecret != s.AppSecret {
		answer(w, 200, map[string]any{"code": 514, "msg": "auth failed"})
		return
	}
	ping := s.PingInterval
	if ping == 0 {
		ping = 120
	}
	u := "ws" + strings.TrimPrefix(s.URL, "http") + "/ws?device_id=" + randID("d") + "&service_id=7&ticket=" + randID("tk")
	answer(w, 200, map[string]any{"code": 0, "msg": "ok", "data": map[string]any{
		"URL": u, "ClientConfig": map[string]int{"ReconnectCount": -1, "ReconnectInterval": 1, "ReconnectNonce": 0, "PingInterval": ping},
	}})
}

func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("service_id") != "7" {
		http.Error(w, "no ticket", http.StatusForbidden)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ctx := context.Background()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.CloseNow() //nolint:errcheck // the server is stopped
		return
	}
	s.conns[c] = true
	s.connected++
	pending := append([]pendingEvent(nil), s.pending...)
	s.notify()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.CloseNow() //nolint:errcheck // gone
	}()
	for _, p := range pending {
		s.push(c, p)
	}
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageBinary {
			continue
		}
		f, err := pbbp2.Unmarshal(data)
		if err != nil {
			c.Close(websocket.StatusProtocolError, "unreadable frame") //nolint:errcheck // gone
			return
		}
		switch {
		case f.Method == pbbp2.MethodControl && f.Header("type") == pbbp2.TypePing && f.Service == 7:
			s.mu.Lock()
			s.pings++
			s.mu.Unlock()
			payload, _ := json.Marshal(map[string]int{"PingInterval": s.pingInterval()})
			s.write(c, &pbbp2.Frame{Method: pbbp2.MethodControl, Service: 7, Headers: []pbbp2.Header{{Key: "type", Value: pbbp2.TypePong}}, Payload: payload})
		case f.Method == pbbp2.MethodData:
			var ack struct{ Code int }
			if json.Unmarshal(f.Payload, &ack) != nil || ack.Code != 200 || f.Header("biz_rt") == "" {
				continue
			}
			id := f.Header("message_id")
			s.mu.Lock()
			for i, p := range s.pending {
				if p.id == id {
					s.pending = append(s.pending[:i], s.pending[i+1:]...)
					s.acks++
					break
				}
			}
			s.notify()
			s.mu.Unlock()
		}
	}
}

func (s *Server) pingInterval() int {
	if s.PingInterval == 0 {
		return 120
	}
	return s.PingInterval
}

func (s *Server) write(c *websocket.Conn, f *pbbp2.Frame) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Write(ctx, websocket.MessageBinary, f.Marshal()) //nolint:errcheck // a lost connection gets it again on the next
}

// push writes an event's data frames (three pieces when Split).
func (s *Server) push(c *websocket.Conn, p pendingEvent) {
	pieces := [][]byte{p.payload}
	if s.Split && len(p.payload) >= 3 {
		n := len(p.payload) / 3
		pieces = [][]byte{p.payload[:n], p.payload[n : 2*n], p.payload[2*n:]}
	}
	for i := len(pieces) - 1; i >= 0; i-- { // out of order, as the platform may
		s.write(c, &pbbp2.Frame{SeqID: uint64(i), LogID: 1, Service: 7, Method: pbbp2.MethodData, Headers: []pbbp2.Header{
			{Key: "type", Value: pbbp2.TypeEvent}, {Key: "message_id", Value: p.id}, {Key: "trace_id", Value: "tr" + p.id},
			{Key: "sum", Value: strconv.Itoa(len(pieces))}, {Key: "seq", Value: strconv.Itoa(i)},
		}, Payload: pieces[i]})
	}
}

// Event is the im.message.receive_v1 event (schema 2.0) of a person's
// message, its envelope's token set to token; it returns the message's
// id with it.
func (s *Server) Event(in Incoming, token string) (id string, payload []byte) {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	id = fmt.Sprintf("om_%08d", n)
	chatType, chat := "p2p", "oc_p2p_"+in.Sender
	if in.Chat != "" {
		chatType, chat = "group", in.Chat
	}
	typ, content := in.Type, in.Content
	if typ == "" {
		typ = "text"
	}
	var mentions []any
	if content == "" {
		text := in.Text
		if in.MentionBot {
			text = "@_user_1 " + text
			mentions = append(mentions, map[string]any{"key": "@_user_1", "name": "nb", "id": map[string]string{"open_id": BotOpenID}})
		}
		b, _ := json.Marshal(map[string]string{"text": text})
		content = string(b)
	}
	payload, _ = json.Marshal(map[string]any{
		"schema": "2.0",
		"header": map[string]any{"event_id": randID("ev"), "event_type": "im.message.receive_v1", "create_time": strconv.FormatInt(time.Now().UnixMilli(), 10), "token": token, "app_id": s.AppID, "tenant_key": "tk"},
		"event": map[string]any{
			"sender": map[string]any{"sender_id": map[string]string{"open_id": in.Sender, "user_id": "u" + in.Sender}, "sender_type": "user", "tenant_key": "tk"},
			"message": map[string]any{"message_id": id, "create_time": strconv.FormatInt(time.Now().UnixMilli(), 10), "chat_id": chat, "chat_type": chatType,
				"message_type": typ, "content": content, "mentions": mentions},
		},
	})
	return id, payload
}

// Post sends a person's message over the long connection (now, or on
// the next connection) and returns its message_id.
func (s *Server) Post(in Incoming) string {
	id, payload := s.Event(in, "")
	p := pendingEvent{id: id, payload: payload}
	s.mu.Lock()
	for key, data := range in.Resources {
		s.resources[id+"/"+key] = data
	}
	s.pending = append(s.pending, p)
	var conns []*websocket.Conn
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		s.push(c, p)
	}
	return id
}

// Drop closes every long connection without a goodbye.
func (s *Server) Drop() {
	s.mu.Lock()
	conns := s.conns
	s.conns = map[*websocket.Conn]bool{}
	s.mu.Unlock()
	for c := range conns {
		c.CloseNow() //nolint:errcheck // dropped on purpose
	}
}

// Connections is how many long connections were opened.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected
}

// Pings is how many pings the client sent.
func (s *Server) Pings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pings
}

// Unacked is how many events wait for their acknowledgement.
func (s *Server) Unacked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Reaction is the emoji the bot added to a message ("" for none).
func (s *Server) Reaction(messageID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reactions[messageID]
}

// Sent are the messages the bot sent to receiveID ("" for all).
func (s *Server) Sent(receiveID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.sent {
		if receiveID == "" || m.ReceiveID == receiveID {
			out = append(out, m)
		}
	}
	return out
}

// Wait waits until cond holds (checked after every change) or ctx ends.
func (s *Server) Wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var msgTypes = map[string]bool{"text": true, "post": true, "interactive": true, "image": true, "file": true, "media": true, "audio": true}

func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	idType := r.URL.Query().Get("receive_id_type")
	var in struct {
		ReceiveID string `json:"receive_id"`
		MsgType   string `json:"msg_type"`
		Content   string `json:"content"`
		UUID      string `json:"uuid"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || !msgTypes[in.MsgType] || !json.Valid([]byte(in.Content)) {
		fail(w, 400, 230001, "invalid message content")
		return
	}
	switch {
	case idType == "chat_id" && !strings.HasPrefix(in.ReceiveID, "oc_"), idType == "open_id" && !strings.HasPrefix(in.ReceiveID, "ou_"), idType != "chat_id" && idType != "open_id":
		fail(w, 400, 230001, "invalid receive_id")
		return
	case strings.HasPrefix(in.ReceiveID, "oc_gone"):
		fail(w, 400, 230002, "Bot/User can NOT be out of the chat.")
		return
	}
	if len(in.Content) > 30<<10 && in.MsgType != "text" {
		fail(w, 400, 230025, "message content too long")
		return
	}
	s.mu.Lock()
	if id, ok := s.uuids[in.UUID]; ok && in.UUID != "" {
		s.mu.Unlock()
		answer(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"message_id": id}})
		return
	}
	// Five messages a second per chat: a sixth within the second is refused.
	var recent []time.Time
	for _, at := range s.lastSend[in.ReceiveID] {
		if time.Since(at) < time.Second {
			recent = append(recent, at)
		}
	}
	if len(recent) >= 5 {
		s.mu.Unlock()
		w.Header().Set("x-ogw-ratelimit-reset", "1")
		fail(w, 429, 230020, "This chat is rate limited")
		return
	}
	s.lastSend[in.ReceiveID] = append(recent, time.Now())
	id := randID("om_")
	if in.UUID != "" {
		s.uuids[in.UUID] = id
	}
	s.sent = append(s.sent, Message{ID: id, ReceiveID: in.ReceiveID, IDType: idType, Type: in.MsgType, Content: in.Content})
	s.notify()
	s.mu.Unlock()
	answer(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"message_id": id, "msg_type": in.MsgType}})
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Content string `json:"content"`
	}
	json.NewDecoder(r.Body).Decode(&in) //nolint:errcheck // checked below
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range s.sent {
		if m.ID == r.PathValue("id") {
			if m.Type != "interactive" {
				fail(w, 400, 230001, "only cards can be patched")
				return
			}
			s.sent[i].Content = in.Content
			s.sent[i].Edits++
			s.notify()
			answer(w, 200, map[string]any{"code": 0, "msg": "success"})
			return
		}
	}
	fail(w, 400, 230011, "message not found")
}

func (s *Server) react(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ReactionType struct {
			EmojiType string `json:"emoji_type"`
		} `json:"reaction_type"`
	}
	json.NewDecoder(r.Body).Decode(&in) //nolint:errcheck // a test reads it
	s.mu.Lock()
	s.reactions[r.PathValue("id")] = in.ReactionType.EmojiType
	s.notify()
	s.mu.Unlock()
	answer(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"reaction_id": randID("r")}})
}

func (s *Server) resource(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, ok := s.resources[r.PathValue("id")+"/"+r.PathValue("key")]
	s.mu.Unlock()
	if !ok || (r.URL.Query().Get("type") != "image" && r.URL.Query().Get("type") != "file") {
		fail(w, 400, 234003, "resource not found")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(data) //nolint:errcheck // the client sees a short file
}

// Upload is a file the bot uploaded.
type Upload struct {
	Key, Name string
	Data      []byte
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	field, keyName, prefix := "file", "file_key", "file_v3_"
	if strings.HasSuffix(r.URL.Path, "/images") {
		field, keyName, prefix = "image", "image_key", "img_v3_"
		if r.FormValue("image_type") != "message" {
			fail(w, 400, 234001, "invalid image_type")
			return
		}
	} else if r.FormValue("file_type") == "" || r.FormValue("file_name") == "" {
		fail(w, 400, 234001, "file_type and file_name required")
		return
	}
	f, h, err := r.FormFile(field)
	if err != nil {
		fail(w, 400, 234001, "no "+field)
		return
	}
	data, _ := io.ReadAll(f)
	key := randID(prefix)
	s.mu.Lock()
	s.uploads = append(s.uploads, Upload{Key: key, Name: h.Filename, Data: data})
	s.mu.Unlock()
	answer(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]string{keyName: key}})
}

// Uploads are the files the bot uploaded.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Upload(nil), s.uploads...)
}
