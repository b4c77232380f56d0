// Package dingtalktest is a DingTalk server for tests, written from
// DingTalk's documentation of Stream mode and of the robot API: POST
// /v1.0/gateway/connections/open with the app's clientId and
// clientSecret answers a websocket endpoint and a one-time ticket; the
// socket carries frames {"specVersion","type","headers","data"} of type
// SYSTEM (topic ping, answered by the client with code 200 and the same
// data; topic disconnect, after which the server closes the socket) and
// CALLBACK (topic /v1.0/im/bot/messages/get, a robot message), which the
// client acknowledges with {"code":200,"headers":{"messageId":…},…};
// what was not acknowledged is sent again on the next connection.
// /v1.0/oauth2/accessToken turns appKey and appSecret into an access
// token that the robot API (oToMessages/batchSend, groupMessages/send,
// messageFiles/download) takes in the x-acs-dingtalk-access-token header
// and the media upload (/media/upload) as its access_token parameter;
// each robot message names a session webhook (/robot/sendBySession) that
// takes {"msgtype":"markdown",…} and answers {"errcode":0}. Throttling is
// answered as DingTalk's API gateway does: HTTP 403 with the code
// Forbidden.AccessDenied.QpsLimitForApi; an unknown conversation with 400.
package dingtalktest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/channel/channeltest"
)

// Endpoints, for Inject and Calls.
const (
	Open     = "connections/open"
	Token    = "accessToken"
	Robot    = "robot" // batchSend and groupMessages/send
	Webhook  = "sendBySession"
	Upload   = "media/upload"
	Download = "messageFiles/download"
)

// Message is a robot message a person sends (a CALLBACK's data).
type Message struct {
	ConversationID   string     `json:"conversationId"`
	ConversationType string     `json:"conversationType"` // "1" or "2"
	MsgID            string     `json:"msgId"`
	MsgType          string     `json:"msgtype"`
	SenderID         string     `json:"senderId"`
	SenderStaffID    string     `json:"senderStaffId"`
	SenderNick       string     `json:"senderNick"`
	IsInAtList       bool       `json:"isInAtList"`
	CreateAt         int64      `json:"createAt"`
	SessionWebhook   string     `json:"sessionWebhook"`
	WebhookExpires   int64      `json:"sessionWebhookExpiredTime"`
	RobotCode        string     `json:"robotCode"`
	ChatbotUserID    string     `json:"chatbotUserId"`
	Text             *Text      `json:"text,omitempty"`
	Content          *Content   `json:"content,omitempty"`
	AtUsers          []struct{} `json:"atUsers,omitempty"`
}

// Text is a text message's content.
type Text struct {
	Content string `json:"content"`
}

// Content is a picture's, a file's or a rich text's content.
type Content struct {
	DownloadCode string           `json:"downloadCode,omitempty"`
	FileName     string           `json:"fileName,omitempty"`
	RichText     []map[string]any `json:"richText,omitempty"`
}

// Sent is a message the robot sent.
type Sent struct {
	// Chat is the staff id or "group:<openConversationId>".
	Chat string
	// Via is "webhook" or "api".
	Via string
	// Key is the robot API's msgKey ("sampleMarkdown", "sampleFile", …);
	// "markdown" by webhook.
	Key   string
	Text  string
	Param map[string]string
	// File is an uploaded file's content, for sampleFile and
	// sampleImageMsg.
	File []byte
}

type delivery struct {
	id   string
	data []byte
	sent time.Time
}

// Server is a fake DingTalk on a loopback port.
type Server struct {
	channeltest.Faults
	// URL is both api.dingtalk.com's and oapi.dingtalk.com's stand-in.
	URL                    string
	ClientID, ClientSecret string

	srv *http.Server
	mu  sync.Mutex

	changed  chan struct{}
	seq      int
	tickets  map[string]bool
	tokens   map[string]bool
	conn     *websocket.Conn
	conns    int
	pending  []*delivery
	pongs    int
	sent     []Sent
	groups   map[string]bool
	users    map[string]bool
	files    map[string][]byte // download code -> content
	media    map[string][]byte // media_id -> content
	interval time.Duration
	last     map[string]time.Time
	expired  bool
	sessions map[string]string // session webhook's session -> chat
}

// New starts a server on 127.0.0.1 for the app clientID/clientSecret.
func New(clientID, clientSecret string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL: "http://" + ln.Addr().String(), ClientID: clientID, ClientSecret: clientSecret,
		changed: make(chan struct{}), tickets: map[string]bool{}, tokens: map[string]bool{},
		groups: map[string]bool{}, users: map[string]bool{}, files: map[string][]byte{}, media: map[string][]byte{},
		last: map[string]time.Time{}, sessions: map[string]string{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1.0/gateway/connections/open", s.open)
	mux.HandleFunc("GET /connect", s.socket)
	mux.HandleFunc("POST /v1.0/oauth2/accessToken", s.token)
	mux.HandleFunc("POST /v1.0/robot/oToMessages/batchSend", s.robot)
	mux.HandleFunc("POST /v1.0/robot/groupMessages/send", s.robot)
	mux.HandleFunc("POST /v1.0/robot/messageFiles/download", s.download)
	mux.HandleFunc("GET /files/{code}", s.file)
	mux.HandleFunc("POST /media/upload", s.upload)
	mux.HandleFunc("POST /robot/sendBySession", s.webhook)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // ends with Close
	return s, nil
}

// Close stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	if s.conn != nil {
		s.conn.CloseNow() //nolint:errcheck // closing
	}
	s.mu.Unlock()
	s.srv.Close()
}

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) next(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s%06d", prefix, s.seq)
}

// Say makes a person send m: its msgId, createAt, session webhook and
// robot code are filled in when empty; its CALLBACK is queued (and sent
// at once when the robot is connected). It returns the message.
func (s *Server) Say(m Message) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.MsgID == "" {
		m.MsgID = s.next("msg")
	}
	if m.ConversationType == "" {
		m.ConversationType = "1"
	}
	if m.MsgType == "" {
		m.MsgType = "text"
	}
	if m.ConversationID == "" {
		m.ConversationID = "cid" + m.SenderStaffID
	}
	m.CreateAt = time.Now().UnixMilli()
	chat := m.SenderStaffID
	if m.ConversationType == "2" {
		chat = "group:" + m.ConversationID
		s.groups[m.ConversationID] = true
	} else {
		s.users[m.SenderStaffID] = true
	}
	if m.SessionWebhook == "" {
		session := s.next("sess")
		s.sessions[session] = chat
		m.SessionWebhook = s.URL + "/robot/sendBySession?session=" + session
		m.WebhookExpires = time.Now().Add(90 * time.Minute).UnixMilli()
	}
	m.RobotCode, m.ChatbotUserID = s.ClientID, "$:LWCP_v1:$bot"
	data, _ := json.Marshal(m)
	d := &delivery{id: s.next("stream-"), data: data}
	s.pending = append(s.pending, d)
	if s.conn != nil {
		s.deliver(s.conn, d)
	}
	return m
}

// AddFile stores a file a person sends and returns its download code.
func (s *Server) AddFile(data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	code := s.next("dc")
	s.files[code] = data
	return code
}

func (s *Server) deliver(c *websocket.Conn, d *delivery) {
	d.sent = time.Now()
	s.write(c, map[string]any{
		"specVersion": "1.0", "type": "CALLBACK", "data": string(d.data),
		"headers": map[string]string{"appId": "app-1", "connectionId": "conn", "contentType": "application/json",
			"messageId": d.id, "time": fmt.Sprint(time.Now().UnixMilli()), "topic": "/v1.0/im/bot/messages/get"},
	})
}

func (s *Server) write(c *websocket.Conn, v any) {
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Write(ctx, websocket.MessageText, b) //nolint:errcheck // a broken socket is the client's to notice
}

// Ping sends a SYSTEM ping; Pongs counts the answers.
func (s *Server) Ping() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.write(s.conn, map[string]any{"specVersion": "1.0", "type": "SYSTEM", "data": `{"opaque":"` + s.next("p") + `"}`,
			"headers": map[string]string{"contentType": "application/json", "messageId": s.next("ping-"), "topic": "ping", "time": "0"}})
	}
}

// Pongs is how many pings were answered with their own data.
func (s *Server) Pongs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pongs
}

// Disconnect sends a SYSTEM disconnect, then closes the socket as the
// gateway does when it moves a client.
func (s *Server) Disconnect() {
	s.mu.Lock()
	c := s.conn
	if c != nil {
		s.write(c, map[string]any{"specVersion": "1.0", "type": "SYSTEM", "data": `{"reason":"moving"}`,
			"headers": map[string]string{"contentType": "application/json", "messageId": s.next("sys-"), "topic": "disconnect"}})
	}
	s.mu.Unlock()
	if c != nil {
		time.Sleep(5 * time.Millisecond)
		c.Close(websocket.StatusNormalClosure, "disconnect") //nolint:errcheck // going away
	}
}

// Drop closes the socket without a word.
func (s *Server) Drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.CloseNow() //nolint:errcheck // dropping
	}
}

// SetInterval throttles the robot API and the webhooks: a destination
// sent to again within d is answered with the QPS-limit refusal.
func (s *Server) SetInterval(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interval = d
}

// ExpireWebhooks makes every session webhook answer as an expired one.
func (s *Server) ExpireWebhooks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expired = true
}

// ExpireTokens makes every access token issued so far expired: the robot
// API answers 401 to them.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = map[string]bool{}
}

// Connections is how many sockets were opened.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Unacked is how many messages wait for an acknowledgement.
func (s *Server) Unacked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Sent are the messages sent to chat ("" for all), in order.
func (s *Server) Sent(chat string) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, m := range s.sent {
		if chat == "" || m.Chat == chat {
			out = append(out, m)
		}
	}
	return out
}

// WaitConnected waits until n sockets were opened.
func (s *Server) WaitConnected(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, ch := s.conns, s.changed
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d connections", got, n)
		}
	}
}

// WaitSent waits until chat was sent n messages.
func (s *Server) WaitSent(ctx context.Context, chat string, n int) ([]Sent, error) {
	for {
		got := s.Sent(chat)
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return got, fmt.Errorf("%d of %d messages sent to %s", len(got), n, chat)
		}
	}
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client's problem
}

func refuse(w http.ResponseWriter, status int, code, msg string) {
	answer(w, status, map[string]string{"code": code, "message": msg, "requestid": "req-1"})
}

// fault answers the injected fault for the endpoint, if any, and
// reports whether it did.
func (s *Server) fault(w http.ResponseWriter, endpoint string) bool {
	switch s.Next(endpoint) {
	case channeltest.Reset:
		channeltest.ResetConnection(w)
	case channeltest.BadGateway:
		http.Error(w, "bad gateway", http.StatusBadGateway)
	case channeltest.Hang:
		time.Sleep(40 * time.Second)
	case channeltest.TooMany:
		refuse(w, http.StatusForbidden, "Forbidden.AccessDenied.QpsLimitForApi", "the API's QPS limit is reached")
	default:
		return false
	}
	return true
}

func decode(r *http.Request, v any) error {
	return json.NewDecoder(io.LimitReader(r.Body, 30<<20)).Decode(v)
}

func (s *Server) open(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, Open) {
		return
	}
	var body struct {
		ClientID      string `json:"clientId"`
		ClientSecret  string `json:"clientSecret"`
		Subscriptions []struct {
			Type, Topic string
		} `json:"subscriptions"`
	}
	if err := decode(r, &body); err != nil || len(body.Subscriptions) == 0 {
		refuse(w, http.StatusBadRequest, "InvalidParameter", "clientId, clientSecret and subscriptions are required")
		return
	}
	if body.ClientID != s.ClientID || body.ClientSecret != s.ClientSecret {
		refuse(w, http.StatusUnauthorized, "InvalidAuthentication", "the client id or secret is wrong")
		return
	}
	s.mu.Lock()
	t := s.next("ticket-")
	s.tickets[t] = true
	s.mu.Unlock()
	answer(w, http.StatusOK, map[string]string{"endpoint": "ws" + strings.TrimPrefix(s.URL, "http") + "/connect", "ticket": t})
}

func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	t := r.URL.Query().Get("ticket")
	s.mu.Lock()
	ok := s.tickets[t]
	delete(s.tickets, t) // a ticket opens one connection
	s.mu.Unlock()
	if !ok {
		http.Error(w, "invalid ticket", http.StatusForbidden)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	s.mu.Lock()
	if s.conn != nil {
		s.conn.CloseNow() //nolint:errcheck // one connection at a time here
	}
	s.conn = c
	s.conns++
	for _, d := range s.pending {
		s.deliver(c, d) // unacknowledged: sent again
	}
	s.notify()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.conn == c {
			s.conn = nil
		}
		s.mu.Unlock()
		c.CloseNow() //nolint:errcheck // done
	}()
	for {
		_, b, err := c.Read(context.Background())
		if err != nil {
			return
		}
		var f struct {
			Code    int               `json:"code"`
			Headers map[string]string `json:"headers"`
			Data    string            `json:"data"`
		}
		if json.Unmarshal(b, &f) != nil || f.Code != 200 {
			continue
		}
		s.mu.Lock()
		if f.Headers["topic"] == "ping" && strings.Contains(f.Data, "opaque") {
			s.pongs++
		}
		for i, d := range s.pending {
			if d.id == f.Headers["messageId"] {
				s.pending = append(s.pending[:i], s.pending[i+1:]...)
				break
			}
		}
		s.notify()
		s.mu.Unlock()
	}
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, Token) {
		return
	}
	var body struct{ AppKey, AppSecret string }
	if err := decode(r, &body); err != nil || body.AppKey != s.ClientID || body.AppSecret != s.ClientSecret {
		refuse(w, http.StatusBadRequest, "invalidClientIdOrSecret", "the app key or secret is wrong")
		return
	}
	s.mu.Lock()
	t := s.next("at-")
	s.tokens[t] = true
	s.mu.Unlock()
	answer(w, http.StatusOK, map[string]any{"accessToken": t, "expireIn": 7200})
}

func (s *Server) authorized(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[tok]
}

// throttled reports whether chat was sent to within the interval, and
// records the send otherwise.
func (s *Server) throttled(chat string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.interval > 0 && time.Since(s.last[chat]) < s.interval {
		return true
	}
	s.last[chat] = time.Now()
	return false
}

func (s *Server) robot(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, Robot) {
		return
	}
	if !s.authorized(r.Header.Get("x-acs-dingtalk-access-token")) {
		refuse(w, http.StatusUnauthorized, "InvalidAuthentication", "the access token is missing or expired")
		return
	}
	var body struct {
		RobotCode          string   `json:"robotCode"`
		UserIDs            []string `json:"userIds"`
		OpenConversationID string   `json:"openConversationId"`
		MsgKey             string   `json:"msgKey"`
		MsgParam           string   `json:"msgParam"`
	}
	if err := decode(r, &body); err != nil || body.RobotCode != s.ClientID {
		refuse(w, http.StatusBadRequest, "InvalidParameter", "robotCode is wrong")
		return
	}
	var param map[string]string
	if err := json.Unmarshal([]byte(body.MsgParam), &param); err != nil {
		refuse(w, http.StatusBadRequest, "InvalidParameter.msgParam", "msgParam is not a JSON object")
		return
	}
	chat := ""
	s.mu.Lock()
	switch {
	case strings.HasSuffix(r.URL.Path, "/groupMessages/send"):
		if !s.groups[body.OpenConversationID] {
			s.mu.Unlock()
			refuse(w, http.StatusBadRequest, "resource.not.found", "the robot is not in the conversation")
			return
		}
		chat = "group:" + body.OpenConversationID
	default:
		if len(body.UserIDs) != 1 || !s.users[body.UserIDs[0]] {
			s.mu.Unlock()
			refuse(w, http.StatusBadRequest, "staffId.notExisted", "no such user")
			return
		}
		chat = body.UserIDs[0]
	}
	s.mu.Unlock()
	if s.throttled(chat) {
		refuse(w, http.StatusForbidden, "Forbidden.AccessDenied.QpsLimitForApi", "the API's QPS limit is reached")
		return
	}
	s.mu.Lock()
	m := Sent{Chat: chat, Via: "api", Key: body.MsgKey, Text: param["text"], Param: param}
	if id := param["mediaId"] + param["photoURL"]; id != "" {
		m.File = s.media[id]
	}
	s.sent = append(s.sent, m)
	key := s.next("pqk")
	s.notify()
	s.mu.Unlock()
	answer(w, http.StatusOK, map[string]any{"processQueryKey": key})
}

func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, Webhook) {
		return
	}
	session := r.URL.Query().Get("session")
	var body struct {
		MsgType  string `json:"msgtype"`
		Markdown struct {
			Title, Text string
		} `json:"markdown"`
	}
	if err := decode(r, &body); err != nil || body.MsgType != "markdown" || body.Markdown.Title == "" {
		answer(w, http.StatusOK, map[string]any{"errcode": 40035, "errmsg": "bad markdown message"})
		return
	}
	s.mu.Lock()
	expired, chat := s.expired, s.sessions[session]
	s.mu.Unlock()
	if expired || chat == "" {
		answer(w, http.StatusOK, map[string]any{"errcode": 300001, "errmsg": "session webhook expired"})
		return
	}
	if s.throttled(chat) {
		answer(w, http.StatusOK, map[string]any{"errcode": 130101, "errmsg": "send too fast, exceed 20 times per minute"})
		return
	}
	s.mu.Lock()
	s.sent = append(s.sent, Sent{Chat: chat, Via: "webhook", Key: "markdown", Text: body.Markdown.Text})
	s.notify()
	s.mu.Unlock()
	answer(w, http.StatusOK, map[string]any{"errcode": 0, "errmsg": "ok"})
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, Download) {
		return
	}
	if !s.authorized(r.Header.Get("x-acs-dingtalk-access-token")) {
		refuse(w, http.StatusUnauthorized, "InvalidAuthentication", "the access token is missing or expired")
		return
	}
	var body struct{ DownloadCode, RobotCode string }
	if err := decode(r, &body); err != nil {
		refuse(w, http.StatusBadRequest, "InvalidParameter", "bad body")
		return
	}
	s.mu.Lock()
	_, ok := s.files[body.DownloadCode]
	s.mu.Unlock()
	if !ok || body.RobotCode != s.ClientID {
		refuse(w, http.StatusBadRequest, "invalidDownloadCode", "no such download code")
		return
	}
	answer(w, http.StatusOK, map[string]string{"downloadUrl": s.URL + "/files/" + body.DownloadCode + "?Signature=signed-secret"})
}

func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, ok := s.files[r.PathValue("code")]
	s.mu.Unlock()
	if !ok || r.URL.Query().Get("Signature") != "signed-secret" {
		http.Error(w, "AccessDenied", http.StatusForbidden)
		return
	}
	w.Write(data) //nolint:errcheck // the client's problem
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, Upload) {
		return
	}
	if !s.authorized(r.URL.Query().Get("access_token")) {
		answer(w, http.StatusOK, map[string]any{"errcode": 40014, "errmsg": "invalid access_token"})
		return
	}
	f, _, err := r.FormFile("media")
	if err != nil {
		answer(w, http.StatusOK, map[string]any{"errcode": 40004, "errmsg": "no media"})
		return
	}
	data, _ := io.ReadAll(f)
	s.mu.Lock()
	id := "@" + s.next("media")
	s.media[id] = data
	s.mu.Unlock()
	answer(w, http.StatusOK, map[string]any{"errcode": 0, "errmsg": "ok", "type": r.URL.Query().Get("type"), "media_id": id, "created_at": time.Now().UnixMilli()})
}
