// Package control is the control page of nb serve and nb gateway: GET
// /control, one static page embedded in the binary (no build step, no
// script from elsewhere: its plots are SVG drawn by its own small
// script), which polls GET /control/api/state for what the server is
// doing: the runs and turns in flight, the last errors, the tokens per
// day by source and by model, the requests and their latency over the
// last hour (package internal/metric keeps them), and the server's own
// tables (cartridges, channels, sessions, cron jobs ...).
//
// Without tokens it answers only requests addressed to a loopback name
// (the server listens on loopback then) and never a page of another
// origin. With tokens the page asks for one: POST /control/login takes
// it in the form's body, never in the URL, and answers with an HttpOnly,
// SameSite=Strict cookie that the page's requests carry; the token is
// never logged, and the cookie is worth nothing to another process.
package control

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/internal/httpjson"
	"github.com/nbots/nb/internal/metric"
)

//go:embed page.html
var page []byte

//go:embed page.js
var script []byte

// CookieName is the login cookie's name.
const CookieName = "nb_control"

// SessionLifetime is how long a login lasts.
const SessionLifetime = 12 * time.Hour

// Table is a panel of rows the server adds to the page.
type Table struct {
	// ID names the panel in the page (data-panel), Title heads it.
	ID    string `json:"id"`
	Title string `json:"title"`
	// Columns are the headings; each row has one cell per column.
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`
	// Note is a line under the table ("" for none).
	Note string `json:"note,omitempty"`
}

// Options configure the page.
type Options struct {
	// Server is "nb serve" or "nb gateway", the page's title.
	Server string
	// Tokens, when set, are what the login takes; without them only
	// loopback requests are answered.
	Tokens []*httpguard.Token
	// Tables are the server's own panels, read at each poll.
	Tables func(ctx context.Context) []Table
	// TokensBySource, when set, replaces the tokens per day by source
	// that package metric counted since the start (the gateway reads its
	// budget ledger, which keeps them across restarts).
	TokensBySource func(ctx context.Context) []metric.DayTokens
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Handler serves /control and the paths below it.
type Handler struct {
	opts Options

	mu       sync.Mutex
	sessions map[string]time.Time // id -> expiry
}

// New returns the page's handler.
func New(opts Options) *Handler {
	return &Handler{opts: opts, sessions: map[string]time.Time{}}
}

func (h *Handler) now() time.Time {
	if h.opts.Now != nil {
		return h.opts.Now()
	}
	return time.Now()
}

// ServeHTTP routes the page's requests.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer chromium sends the
	// login form with Origin: null, which the origin check refuses.
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	if msg := h.refused(r); msg != "" {
		httpjson.Write(w, http.StatusForbidden, map[string]any{"error": msg})
		return
	}
	switch {
	case r.URL.Path == "/control" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		hd.Set("Content-Type", "text/html; charset=utf-8")
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		w.Write(page) //nolint:errcheck // the client may have gone
	case r.URL.Path == "/control/page.js" && r.Method == http.MethodGet:
		hd.Set("Content-Type", "text/javascript; charset=utf-8")
		w.Write(script) //nolint:errcheck // the client may have gone
	case r.URL.Path == "/control/login" && r.Method == http.MethodPost:
		h.login(w, r)
	case r.URL.Path == "/control/logout" && r.Method == http.MethodPost:
		if c, err := r.Cookie(CookieName); err == nil {
			h.mu.Lock()
			delete(h.sessions, c.Value)
			h.mu.Unlock()
		}
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/control", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/control", http.StatusSeeOther)
	case r.URL.Path == "/control/api/session" && r.Method == http.MethodGet:
		// Whether the page must ask for the token (200 either way: the
		// page asks before it polls, and logs no failed request).
		httpjson.Write(w, http.StatusOK, map[string]any{"authorized": h.authorized(r), "server": h.opts.Server})
	case r.URL.Path == "/control/api/state" && r.Method == http.MethodGet:
		if !h.authorized(r) {
			httpjson.Write(w, http.StatusUnauthorized, map[string]any{"error": "log in with the server's token", "login": true})
			return
		}
		httpjson.Write(w, http.StatusOK, h.State(r.Context()))
	default:
		httpjson.Write(w, http.StatusNotFound, map[string]any{"error": fmt.Sprintf("there is no route %s %s on the control page", r.Method, r.URL.Path)})
	}
}

// refused says why r is not answered: a foreign Origin, or (without
// tokens) a request to a loopback listener under another name.
func (h *Handler) refused(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host && o != "https://"+r.Host {
		return fmt.Sprintf("the control page does not answer the web page of origin %q: only its own", o)
	}
	if len(h.opts.Tokens) == 0 {
		la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if la != nil && !httpguard.IsLoopbackAddr(la.String()) {
			return "the control page needs a token on a listener beyond loopback: start the server with one"
		}
		if !httpguard.IsLoopbackHost(r.Host) {
			return fmt.Sprintf("the server has no token, so its control page answers only requests addressed to localhost, 127.0.0.1 or ::1, not %q (a web page could reach it through DNS rebinding)", r.Host)
		}
	}
	return ""
}

// authorized reports whether r may read the state: always without
// tokens; with them, a login cookie or a bearer token.
func (h *Handler) authorized(r *http.Request) bool {
	if len(h.opts.Tokens) == 0 {
		return true
	}
	if c, err := r.Cookie(CookieName); err == nil {
		h.mu.Lock()
		defer h.mu.Unlock()
		exp, ok := h.sessions[c.Value]
		if ok && h.now().Before(exp) {
			return true
		}
		delete(h.sessions, c.Value)
		return false
	}
	if r.Header.Get("Authorization") != "" {
		_, err := httpguard.Authenticate(h.opts.Tokens, r)
		return err == nil
	}
	return false
}

// login takes the token from the form's body and sets the cookie.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if len(h.opts.Tokens) == 0 {
		http.Redirect(w, r, "/control", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil {
		httpjson.Write(w, http.StatusBadRequest, map[string]any{"error": "send the token as the form field token"})
		return
	}
	probe := &http.Request{Header: http.Header{"Authorization": {"Bearer " + r.PostForm.Get("token")}}}
	if _, err := httpguard.Authenticate(h.opts.Tokens, probe); err != nil {
		httpjson.Write(w, http.StatusUnauthorized, map[string]any{"error": "the token is not valid for this server"})
		return
	}
	var b [32]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	id := hex.EncodeToString(b[:])
	now := h.now()
	h.mu.Lock()
	for k, exp := range h.sessions {
		if !now.Before(exp) {
			delete(h.sessions, k)
		}
	}
	h.sessions[id] = now.Add(SessionLifetime)
	h.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: "/control", MaxAge: int(SessionLifetime / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/control", http.StatusSeeOther)
}

// State is what GET /control/api/state answers.
type State struct {
	Server   string             `json:"server"`
	Now      time.Time          `json:"now"`
	InFlight []metric.Run       `json:"in_flight"`
	Errors   []metric.Error     `json:"errors"`
	Minutes  []metric.Minute    `json:"minutes"`
	BySource []metric.DayTokens `json:"tokens_by_source"`
	ByModel  []metric.DayTokens `json:"tokens_by_model"`
	Days     []string           `json:"days"` // the 30 days the plots show, oldest first
	Tables   []Table            `json:"tables"`
}

// State reads what the page shows now.
func (h *Handler) State(ctx context.Context) State {
	now := h.now()
	st := State{Server: h.opts.Server, Now: now.UTC(), InFlight: metric.InFlight(now), Errors: metric.LastErrors(),
		Minutes: metric.LastHour(now), ByModel: metric.TokensPerDay("model"), BySource: metric.TokensPerDay("source")}
	if h.opts.TokensBySource != nil {
		st.BySource = h.opts.TokensBySource(ctx)
	}
	for i := 29; i >= 0; i-- {
		st.Days = append(st.Days, now.UTC().AddDate(0, 0, -i).Format(time.DateOnly))
	}
	if h.opts.Tables != nil {
		st.Tables = h.opts.Tables(ctx)
	}
	if st.InFlight == nil {
		st.InFlight = []metric.Run{}
	}
	if st.Tables == nil {
		st.Tables = []Table{}
	}
	return st
}
