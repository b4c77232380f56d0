// Package telegramtest is a Telegram Bot API server for tests, written
// from the API's documentation (https://core.telegram.org/bots/api): the
// same URLs (/bot<token>/<method>, /file/bot<token>/<path>), the same
// envelope ({"ok":…,"result":…} or {"ok":false,"error_code":…,
// "description":…,"parameters":{"retry_after":…}}), getUpdates long
// polling with offsets that confirm earlier updates (or, after
// setWebhook, updates posted to the webhook with its secret_token, one at
// a time, until answered 2xx; getUpdates then answers 409), sendMessage and
// editMessageText with entities checked against the text, sendPhoto and
// sendDocument with their multipart uploads, getFile, and
// the API's own error texts. Tests make people write to the bot, read
// what the bot sent, and inject failures: connection resets, 5xx, polls
// that hang, 429s per chat.
package telegramtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/telegram/botapi"
)

// Server is a fake Bot API server on a loopback port.
type Server struct {
	// URL is the apiBase to give the channel.
	URL string
	// Token is the only token it accepts.
	Token string
	// Bot is the bot's own user (getMe).
	Bot botapi.User

	srv *channeltest.Loopback
	// Faults counts the requests by method and answers the ones
	// injected: a reset connection, a 502 in the API's envelope, a
	// request left hanging, a 429 with retry_after 1.
	channeltest.Faults

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every change
	nextUpdate int64
	updates    []botapi.Update // not yet confirmed
	nextMsg    map[int64]int64
	sent       map[int64][]*botapi.Message // the bot's messages per chat
	chats      map[int64]botapi.Chat
	blocked    map[int64]bool
	files      map[string][]byte
	interval   time.Duration
	lastSend   map[int64]time.Time
	delay      map[int64]time.Duration
	rejectEnts bool
	poller     chan struct{} // closes the running getUpdates (409)
	// webhook is the URL updates are posted to, with its secret, when set.
	webhook, secret string
	hookStop        chan struct{}
	hookCalls       int
	hookRefused     int
	// commands is the menu setMyCommands set.
	commands []botapi.BotCommand
}

// New starts a server for token on 127.0.0.1.
func New(token string) (*Server, error) {
	s := &Server{
		Token:      token,
		Bot:        botapi.User{ID: 7000001, IsBot: true, FirstName: "nb", Username: "nb_test_bot"},
		changed:    make(chan struct{}),
		nextUpdate: 100000,
		nextMsg:    map[int64]int64{},
		sent:       map[int64][]*botapi.Message{},
		chats:      map[int64]botapi.Chat{},
		blocked:    map[int64]bool{},
		files:      map[string][]byte{},
		lastSend:   map[int64]time.Time{},
		delay:      map[int64]time.Duration{},
	}
	srv, err := channeltest.NewLoopback(s, token)
	if err != nil {
		return nil, err
	}
	s.srv, s.URL = srv, srv.URL
	return s, nil
}

// Requests are the requests received so far ("POST /bot<secret>/getMe").
func (s *Server) Requests() []string { return s.srv.Requests() }

// Close stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.stopHookLocked()
	s.mu.Unlock()
	s.srv.Close()
}

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Post makes a person send m: the server gives it a message id in its
// chat and queues an update. It returns the message as sent.
func (s *Server) Post(m botapi.Message) botapi.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chats[m.Chat.ID] = m.Chat
	s.nextMsg[m.Chat.ID]++
	m.MessageID = s.nextMsg[m.Chat.ID]
	if m.Date == 0 {
		m.Date = time.Now().Unix()
	}
	s.nextUpdate++
	msg := m
	s.updates = append(s.updates, botapi.Update{UpdateID: s.nextUpdate, Message: &msg})
	s.notify()
	return m
}

// Say is Post of a text from a person in their private chat.
func (s *Server) Say(from botapi.User, text string) botapi.Message {
	return s.Post(botapi.Message{From: &from, Chat: botapi.Chat{ID: from.ID, Type: botapi.Private, FirstName: from.FirstName, Username: from.Username}, Text: text})
}

// AddFile stores content and returns its file_id.
func (s *Server) AddFile(content []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("file-%d", len(s.files)+1)
	s.files[id] = content
	return id
}

// Sent returns the bot's messages in a chat, as they are now (edits
// applied).
func (s *Server) Sent(chatID int64) []botapi.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]botapi.Message, 0, len(s.sent[chatID]))
	for _, m := range s.sent[chatID] {
		out = append(out, *m)
	}
	return out
}

// WaitSent waits until the bot has sent n messages to the chat.
func (s *Server) WaitSent(ctx context.Context, chatID int64, n int) ([]botapi.Message, error) {
	for {
		s.mu.Lock()
		got, ch := len(s.sent[chatID]), s.changed
		s.mu.Unlock()
		if got >= n {
			return s.Sent(chatID), nil
		}
		select {
		case <-ctx.Done():
			return s.Sent(chatID), fmt.Errorf("chat %d: %d of %d messages: %w", chatID, got, n, ctx.Err())
		case <-ch:
		}
	}
}

// Pending is how many updates have not been confirmed by a later
// getUpdates offset.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.updates)
}

// Block makes the chat refuse the bot (403, as after the person blocked it).
func (s *Server) Block(chatID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocked[chatID] = true
}

// SetChatInterval is the least time between two messages (sent or
// edited) of the bot in one chat; sooner gets 429 with retry_after.
func (s *Server) SetChatInterval(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interval = d
}

// SetChatDelay makes every answer about the chat come d late: a slow
// destination.
func (s *Server) SetChatDelay(chatID int64, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay[chatID] = d
}

// RejectEntities makes messages with entities fail as Telegram fails on
// entities it cannot parse.
func (s *Server) RejectEntities(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectEnts = on
}

type apiError struct {
	code        int
	description string
	retryAfter  int
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if rest, ok := strings.CutPrefix(path, "/file/bot"); ok {
		s.serveFile(w, rest)
		return
	}
	rest, ok := strings.CutPrefix(path, "/bot")
	if !ok {
		writeError(w, apiError{code: 404, description: "Not Found"})
		return
	}
	token, method, _ := strings.Cut(rest, "/")
	if token != s.Token {
		writeError(w, apiError{code: 401, description: "Unauthorized"})
		return
	}
	// The faults answer in the API's envelope: a 502 and a 429 with
	// retry_after 1.
	s.Serve(w, r, method, apiAnswers, func(w http.ResponseWriter) { s.call(w, r, method) })
}

var apiAnswers = channeltest.Answers{
	BadGateway: func(w http.ResponseWriter) { writeError(w, apiError{code: 502, description: "Bad Gateway"}) },
	TooMany: func(w http.ResponseWriter) {
		writeError(w, apiError{code: 429, description: "Too Many Requests: retry after 1", retryAfter: 1})
	},
}

// call carries out one Bot API method.
func (s *Server) call(w http.ResponseWriter, r *http.Request, method string) {
	params, err := readParams(r)
	if err != nil {
		writeError(w, apiError{code: 400, description: "Bad Request: " + err.Error()})
		return
	}
	var result any
	var aerr *apiError
	switch method {
	case "getMe":
		result = s.Bot
	case "getUpdates":
		result, aerr = s.getUpdates(r.Context(), params)
	case "sendMessage":
		result, aerr = s.sendMessage(r.Context(), params)
	case "editMessageText":
		result, aerr = s.editMessageText(r.Context(), params)
	case "sendChatAction":
		result = true
	case "setWebhook":
		result, aerr = s.setWebhook(params)
	case "deleteWebhook":
		s.mu.Lock()
		s.stopHookLocked()
		s.mu.Unlock()
		result = true
	case "setMyCommands":
		result, aerr = s.setMyCommands(params)
	case "getMyCommands":
		s.mu.Lock()
		result = append([]botapi.BotCommand{}, s.commands...)
		s.mu.Unlock()
	case "getFile":
		result, aerr = s.getFile(params)
	case "sendPhoto":
		result, aerr = s.sendFile(r, params, "photo", 10<<20)
	case "sendDocument":
		result, aerr = s.sendFile(r, params, "document", 50<<20)
	default:
		aerr = &apiError{code: 404, description: "Not Found"}
	}
	if aerr != nil {
		writeError(w, *aerr)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(botapi.Response[any]{OK: true, Result: result}) //nolint:errcheck // the client went away
}

func writeError(w http.ResponseWriter, e apiError) {
	r := botapi.Response[any]{OK: false, ErrorCode: e.code, Description: e.description}
	if e.retryAfter > 0 {
		r.Parameters = &botapi.ResponseParameters{RetryAfter: e.retryAfter}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.code)
	json.NewEncoder(w).Encode(r) //nolint:errcheck // the client went away
}

// params holds a request's parameters from JSON, a form or the query, as
// the Bot API accepts all three.
type params map[string]json.RawMessage

func readParams(r *http.Request) (params, error) {
	p := params{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			return nil, fmt.Errorf("can't parse JSON request: %v", err)
		}
		return p, nil
	}
	if err := r.ParseMultipartForm(1 << 20); err != nil && err != http.ErrNotMultipart {
		return nil, err
	}
	for k, v := range r.Form {
		if len(v) == 0 {
			continue
		}
		if json.Valid([]byte(v[0])) && !strings.HasPrefix(v[0], "\"") {
			p[k] = json.RawMessage(v[0])
		} else {
			b, _ := json.Marshal(v[0])
			p[k] = b
		}
	}
	return p, nil
}

func (p params) int(key string) (int64, bool) {
	raw, ok := p[key]
	if !ok {
		return 0, false
	}
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		return n, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

func (p params) str(key string) string {
	var s string
	json.Unmarshal(p[key], &s) //nolint:errcheck // absent or not a string: ""
	return s
}

func (p params) entities() ([]botapi.MessageEntity, error) {
	raw, ok := p["entities"]
	if !ok {
		return nil, nil
	}
	var es []botapi.MessageEntity
	if err := json.Unmarshal(raw, &es); err != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil || json.Unmarshal([]byte(s), &es) != nil {
			return nil, fmt.Errorf("can't parse entities JSON object")
		}
	}
	return es, nil
}

// setWebhook starts posting updates to the URL, one at a time in order,
// each until it is answered 2xx (then it is confirmed), with the secret
// in X-Telegram-Bot-Api-Secret-Token.
func (s *Server) setWebhook(p params) (any, *apiError) {
	u := p.str("url")
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://127.0.0.1:") {
		return nil, &apiError{code: 400, description: "Bad Request: bad webhook: An HTTPS URL must be provided for webhook"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopHookLocked()
	s.webhook, s.secret = u, p.str("secret_token")
	stop := make(chan struct{})
	s.hookStop = stop
	go s.deliver(u, s.secret, stop)
	return true, nil
}

func (s *Server) stopHookLocked() {
	if s.hookStop != nil {
		close(s.hookStop)
		s.hookStop = nil
	}
	s.webhook, s.secret = "", ""
}

// WebhookCalls is how many update deliveries the webhook got, and how
// many it refused (a non-2xx answer).
func (s *Server) WebhookCalls() (calls, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hookCalls, s.hookRefused
}

// Webhook is the URL set by setWebhook ("" when none).
func (s *Server) Webhook() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook
}

// PostRaw posts a body to the webhook as Telegram would, with the given
// secret (a forger's, say), and returns the status.
func (s *Server) PostRaw(secret string, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, s.Webhook(), bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set(botapi.SecretHeader, secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (s *Server) deliver(u, secret string, stop chan struct{}) {
	client := &http.Client{Timeout: 10 * time.Second}
	wait := 10 * time.Millisecond
	for {
		s.mu.Lock()
		var next *botapi.Update
		if len(s.updates) > 0 {
			up := s.updates[0]
			next = &up
		}
		ch := s.changed
		s.mu.Unlock()
		if next == nil {
			select {
			case <-stop:
				return
			case <-ch:
				continue
			}
		}
		body, _ := json.Marshal(next)
		req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set(botapi.SecretHeader, secret)
		}
		resp, err := client.Do(req)
		ok := err == nil && resp.StatusCode/100 == 2
		if err == nil {
			resp.Body.Close()
		}
		s.mu.Lock()
		s.hookCalls++
		if ok {
			if len(s.updates) > 0 && s.updates[0].UpdateID == next.UpdateID {
				s.updates = s.updates[1:]
			}
			s.notify()
		} else {
			s.hookRefused++
		}
		s.mu.Unlock()
		if !ok {
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
		}
	}
}

func (s *Server) getUpdates(ctx context.Context, p params) (any, *apiError) {
	s.mu.Lock()
	hooked := s.webhook != ""
	s.mu.Unlock()
	if hooked {
		return nil, &apiError{code: 409, description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
	}
	offset, _ := p.int("offset")
	limit, ok := p.int("limit")
	if !ok || limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, _ := p.int("timeout")
	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()
	s.mu.Lock()
	if s.poller != nil {
		close(s.poller) // the older request ends with 409
	}
	mine := make(chan struct{})
	s.poller = mine
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.poller == mine {
			s.poller = nil
		}
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		if offset > 0 {
			// "An update is considered confirmed as soon as getUpdates is
			// called with an offset higher than its update_id."
			i := 0
			for i < len(s.updates) && s.updates[i].UpdateID < offset {
				i++
			}
			s.updates = s.updates[i:]
		}
		out := make([]botapi.Update, 0, min(int64(len(s.updates)), limit))
		for _, u := range s.updates {
			if int64(len(out)) == limit {
				break
			}
			out = append(out, u)
		}
		ch := s.changed
		s.mu.Unlock()
		if len(out) > 0 || timeout <= 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, &apiError{code: 499, description: "client went away"}
		case <-mine:
			return nil, &apiError{code: 409, description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
		case <-deadline.C:
			return []botapi.Update{}, nil
		case <-ch:
		}
	}
}

func (s *Server) chat(p params) (botapi.Chat, *apiError) {
	id, ok := p.int("chat_id")
	if !ok {
		return botapi.Chat{}, &apiError{code: 400, description: "Bad Request: chat_id is empty"}
	}
	c, ok := s.chats[id]
	if !ok {
		return botapi.Chat{}, &apiError{code: 400, description: "Bad Request: chat not found"}
	}
	if s.blocked[id] {
		return botapi.Chat{}, &apiError{code: 403, description: "Forbidden: bot was blocked by the user"}
	}
	return c, nil
}

// pace applies the chat's delay and rate limit; called with s.mu held,
// it may release it while it sleeps.
func (s *Server) pace(ctx context.Context, chatID int64) *apiError {
	if d := s.delay[chatID]; d > 0 {
		s.mu.Unlock()
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		s.mu.Lock()
	}
	if s.interval > 0 {
		now := time.Now()
		if last, ok := s.lastSend[chatID]; ok && now.Sub(last) < s.interval {
			wait := int(math.Ceil((s.interval - now.Sub(last)).Seconds()))
			return &apiError{code: 429, description: fmt.Sprintf("Too Many Requests: retry after %d", wait), retryAfter: wait}
		}
		s.lastSend[chatID] = now
	}
	return nil
}

func checkText(text string, es []botapi.MessageEntity, reject bool) *apiError {
	n := len(utf16.Encode([]rune(text)))
	if strings.TrimSpace(text) == "" {
		return &apiError{code: 400, description: "Bad Request: message text is empty"}
	}
	if n > 4096 {
		return &apiError{code: 400, description: "Bad Request: message is too long"}
	}
	if reject && len(es) > 0 {
		return &apiError{code: 400, description: "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0"}
	}
	for _, e := range es {
		if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > n {
			return &apiError{code: 400, description: fmt.Sprintf("Bad Request: can't parse entities: entity beginning at UTF-16 offset %d ends after the end of the text at UTF-16 offset %d", e.Offset, n)}
		}
		if e.Type == "text_link" && e.URL == "" {
			return &apiError{code: 400, description: "Bad Request: can't parse entities: text_link entity has no URL"}
		}
	}
	return nil
}

func (s *Server) sendMessage(ctx context.Context, p params) (any, *apiError) {
	es, err := p.entities()
	if err != nil {
		return nil, &apiError{code: 400, description: "Bad Request: " + err.Error()}
	}
	text := p.str("text")
	s.mu.Lock()
	defer s.mu.Unlock()
	c, aerr := s.chat(p)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := checkText(text, es, s.rejectEnts); aerr != nil {
		return nil, aerr
	}
	if aerr := s.pace(ctx, c.ID); aerr != nil {
		return nil, aerr
	}
	s.nextMsg[c.ID]++
	bot := s.Bot
	m := &botapi.Message{MessageID: s.nextMsg[c.ID], From: &bot, Chat: c, Date: time.Now().Unix(), Text: text, Entities: es}
	if raw, ok := p["reply_parameters"]; ok {
		var rp botapi.ReplyParameters
		if json.Unmarshal(raw, &rp) == nil && rp.MessageID > 0 {
			m.ReplyToMessage = &botapi.Message{MessageID: rp.MessageID, Chat: c}
		}
	}
	s.sent[c.ID] = append(s.sent[c.ID], m)
	s.notify()
	return m, nil
}

// sendFile is sendPhoto or sendDocument with the file uploaded as
// multipart/form-data in the field; limit is the Bot API's size limit
// for the kind (10 MB for photos, 50 MB for other files).
func (s *Server) sendFile(r *http.Request, p params, field string, limit int64) (any, *apiError) {
	if r.MultipartForm == nil || len(r.MultipartForm.File[field]) == 0 {
		return nil, &apiError{code: 400, description: "Bad Request: there is no " + field + " in the request"}
	}
	fh := r.MultipartForm.File[field][0]
	if fh.Size > limit {
		return nil, &apiError{code: 413, description: "Request Entity Too Large"}
	}
	f, err := fh.Open()
	if err != nil {
		return nil, &apiError{code: 400, description: "Bad Request: " + err.Error()}
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, &apiError{code: 400, description: "Bad Request: " + err.Error()}
	}
	id := s.AddFile(data)
	s.mu.Lock()
	defer s.mu.Unlock()
	c, aerr := s.chat(p)
	if aerr != nil {
		return nil, aerr
	}
	s.nextMsg[c.ID]++
	bot := s.Bot
	m := &botapi.Message{MessageID: s.nextMsg[c.ID], From: &bot, Chat: c, Date: time.Now().Unix()}
	if field == "photo" {
		m.Photo = []botapi.PhotoSize{{FileID: id, FileUniqueID: "u" + id, FileSize: int64(len(data))}}
	} else {
		m.Document = &botapi.Document{FileID: id, FileUniqueID: "u" + id, FileName: fh.Filename, MimeType: fh.Header.Get("Content-Type"), FileSize: int64(len(data))}
	}
	s.sent[c.ID] = append(s.sent[c.ID], m)
	s.notify()
	return m, nil
}

// FileContent is the content of a file by its file_id.
func (s *Server) FileContent(id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files[id]
}

func (s *Server) editMessageText(ctx context.Context, p params) (any, *apiError) {
	es, err := p.entities()
	if err != nil {
		return nil, &apiError{code: 400, description: "Bad Request: " + err.Error()}
	}
	text := p.str("text")
	id, _ := p.int("message_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	c, aerr := s.chat(p)
	if aerr != nil {
		return nil, aerr
	}
	var m *botapi.Message
	for _, x := range s.sent[c.ID] {
		if x.MessageID == id {
			m = x
		}
	}
	if m == nil {
		return nil, &apiError{code: 400, description: "Bad Request: message to edit not found"}
	}
	if aerr := checkText(text, es, s.rejectEnts); aerr != nil {
		return nil, aerr
	}
	if m.Text == text && entitiesEqual(m.Entities, es) {
		return nil, &apiError{code: 400, description: "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"}
	}
	if aerr := s.pace(ctx, c.ID); aerr != nil {
		return nil, aerr
	}
	m.Text, m.Entities, m.EditDate = text, es, time.Now().Unix()
	s.notify()
	return m, nil
}

func entitiesEqual(a, b []botapi.MessageEntity) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func (s *Server) getFile(p params) (any, *apiError) {
	id := p.str("file_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.files[id]
	if !ok {
		return nil, &apiError{code: 400, description: "Bad Request: invalid file_id"}
	}
	return botapi.File{FileID: id, FileUniqueID: "u" + id, FileSize: int64(len(data)), FilePath: "documents/" + id + ".bin"}, nil
}

func (s *Server) serveFile(w http.ResponseWriter, rest string) {
	token, path, _ := strings.Cut(rest, "/")
	if token != s.Token {
		writeError(w, apiError{code: 401, description: "Unauthorized"})
		return
	}
	id := strings.TrimSuffix(strings.TrimPrefix(path, "documents/"), ".bin")
	s.mu.Lock()
	data, ok := s.files[id]
	s.mu.Unlock()
	if !ok {
		writeError(w, apiError{code: 404, description: "Not Found"})
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data) //nolint:errcheck // the client went away
}

// botCommand is what the Bot API takes as a command: 1-32 characters,
// lowercase English letters, digits and underscores.
var botCommand = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// setMyCommands checks and keeps the command menu as the Bot API does:
// commands is a JSON array of BotCommand (as JSON, or a JSON string in a
// form), at most 100, each command 1-32 of [a-z0-9_], each description
// 1-256 characters.
func (s *Server) setMyCommands(p params) (any, *apiError) {
	raw, ok := p["commands"]
	if !ok {
		return nil, &apiError{code: 400, description: "Bad Request: parameter \"commands\" is required"}
	}
	var cmds []botapi.BotCommand
	if err := json.Unmarshal(raw, &cmds); err != nil {
		var str string
		if json.Unmarshal(raw, &str) != nil || json.Unmarshal([]byte(str), &cmds) != nil {
			return nil, &apiError{code: 400, description: "Bad Request: can't parse commands JSON object"}
		}
	}
	if len(cmds) > 100 {
		return nil, &apiError{code: 400, description: "Bad Request: too many commands specified"}
	}
	for _, c := range cmds {
		if !botCommand.MatchString(c.Command) {
			return nil, &apiError{code: 400, description: "Bad Request: BOT_COMMAND_INVALID"}
		}
		if n := utf8.RuneCountInString(strings.TrimSpace(c.Description)); n < 1 || n > 256 {
			return nil, &apiError{code: 400, description: "Bad Request: command description is empty"}
		}
	}
	s.mu.Lock()
	s.commands = cmds
	s.mu.Unlock()
	return true, nil
}

// Commands is the command menu last set with setMyCommands.
func (s *Server) Commands() []botapi.BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]botapi.BotCommand{}, s.commands...)
}
