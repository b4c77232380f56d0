// Package openaiapi serves nb's bots over an OpenAI-compatible HTTP API:
// GET /v1/models, POST /v1/chat/completions and POST /v1/responses, so
// that OpenAI's SDKs, the ai SDK and agent frameworks talk to cartridges
// as they talk to models. A model is a cartridge: its directive,
// backdrop, adapters, tools and provider apply; the client's messages
// are the conversation, and the client's own tools are offered beside
// the cartridge's and returned to it when the model calls them.
//
// The package is a set of handlers. Listening, tokens, limits, logging
// and the cartridge catalog belong to the server that mounts them
// (Register), which gives the catalog through the Catalog interface.
package openaiapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/server"
)

// Model is one cartridge a client may use, as the catalog lists it: its
// id is the model name clients send; one whose Err is set (it failed to
// load) is not listed.
type Model = server.Model

// Catalog gives the handlers the cartridges of a request's caller. The
// server behind them (a *server.Server) decides what a token may use and
// keeps the bots.
type Catalog interface {
	// Models lists the cartridges the request's token may use, sorted by
	// id.
	Models(ctx context.Context) []Model
	// Bot returns the bot of the cartridge id. Its errors may implement
	// StatusCode() int: 404 for an unknown id, 403 for one the token may
	// not use, 500 for one that failed to load.
	Bot(ctx context.Context, id string) (*bot.Bot, error)
}

// Options configure a Handler. The zero value works.
type Options struct {
	// Logger receives what the handlers log beyond the server's request
	// log (a tool round that was lost, a failed exchange); nil discards
	// it. RequestLogger, when set, gives the logger of a request instead
	// (the server's, with the request's id).
	Logger        *slog.Logger
	RequestLogger func(ctx context.Context) *slog.Logger
	// Confirmer decides whether a cartridge tool that needs a confirmation
	// may run; nil denies them (the model is told the user did not allow
	// it), since there is no one to ask.
	Confirmer agent.Confirmer
	// MaxBody bounds a request body in bytes; 0 means DefaultMaxBody.
	MaxBody int64
	// Admit, when set, starts each exchange: the server's concurrency,
	// rate and deadline (its errors may implement StatusCode() int). The
	// returned context is the exchange's; done is called when it ends.
	Admit func(ctx context.Context, detached bool) (run context.Context, done func(), err error)
	// EndUser, when set, says who a request is for (the server's view:
	// its token, its address); the client's user field is added to it.
	EndUser func(r *http.Request) string
	// Owner, when set, names who a request comes from (its token): a
	// stored response, and the server's part of a tool round, are given
	// back only to requests of the same owner.
	Owner func(r *http.Request) string
	// Responses bounds the responses kept for previous_response_id;
	// Rounds bounds the server's part of tool rounds kept until the
	// client sends its results. Zero fields take the defaults
	// (DefaultResponses, DefaultRounds).
	Responses, Rounds StoreLimits
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Shared, when set, keeps the responses and the tool rounds in the
	// store of the server's replicas instead of this process's memory, so
	// that any replica continues a conversation (see docs/scale-out.md).
	Shared eventlog.Shared
}

// StoreLimits bound a store kept in memory: the oldest entries go first
// when there are more than Count or they take more than Bytes, and each
// expires after TTL.
type StoreLimits struct {
	Count int
	Bytes int64
	TTL   time.Duration
}

// The defaults of Options.
var (
	// DefaultMaxBody is large enough for a long conversation with a few
	// images inline.
	DefaultMaxBody int64 = 32 << 20
	// DefaultResponses keeps up to 10,000 responses or 256 MiB, for an
	// hour.
	DefaultResponses = StoreLimits{Count: 10_000, Bytes: 256 << 20, TTL: time.Hour}
	// DefaultRounds keeps up to 10,000 tool rounds or 64 MiB, for an hour.
	DefaultRounds = StoreLimits{Count: 10_000, Bytes: 64 << 20, TTL: time.Hour}
)

func (l StoreLimits) or(d StoreLimits) StoreLimits {
	if l.Count <= 0 {
		l.Count = d.Count
	}
	if l.Bytes <= 0 {
		l.Bytes = d.Bytes
	}
	if l.TTL <= 0 {
		l.TTL = d.TTL
	}
	return l
}

// Handler serves the API over a Catalog. It is an http.Handler for the
// paths under /v1/; Register mounts each route on a mux instead.
type Handler struct {
	catalog   Catalog
	log       *slog.Logger
	reqLog    func(ctx context.Context) *slog.Logger
	confirmer agent.Confirmer
	maxBody   int64
	admit     func(ctx context.Context, detached bool) (context.Context, func(), error)
	endUser   func(r *http.Request) string
	owner     func(r *http.Request) string
	now       func() time.Time
	responses *eventlog.Keeper[*storedResponse]
	rounds    *eventlog.Keeper[*keptRound]
	mux       *http.ServeMux
}

// New returns the handlers of the API over c.
func New(c Catalog, o Options) *Handler {
	h := &Handler{catalog: c, log: o.Logger, reqLog: o.RequestLogger, confirmer: o.Confirmer, maxBody: o.MaxBody, now: o.Now, admit: o.Admit, endUser: o.EndUser, owner: o.Owner}
	if h.log == nil {
		h.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBody
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.responses = eventlog.NewKeeper("response", eventlog.Limits(o.Responses.or(DefaultResponses)), h.now, o.Shared, encodeResponse, decodeResponse).
		Summarized(func(r *storedResponse) eventlog.Summary { return r.summary })
	h.rounds = eventlog.NewKeeper("tool_round", eventlog.Limits(o.Rounds.or(DefaultRounds)), h.now, o.Shared, encodeRound, decodeRound)
	h.mux = http.NewServeMux()
	h.Register(h.mux)
	return h
}

// Mux is where routes are mounted: an *http.ServeMux, or the server
// core that puts them behind its tokens, limits and logs.
type Mux interface {
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

// logger is the logger of a request's context.
func (h *Handler) logger(ctx context.Context) *slog.Logger {
	if h.reqLog != nil {
		return h.reqLog(ctx)
	}
	return h.log
}

// ownerOf is who r comes from, "" without Options.Owner.
func (h *Handler) ownerOf(r *http.Request) string {
	if h.owner == nil {
		return ""
	}
	return h.owner(r)
}

// Register mounts the routes on mux, with net/http's patterns:
//
//	GET    /v1/models
//	GET    /v1/models/{id}
//	POST   /v1/chat/completions
//	POST   /v1/responses
//	GET    /v1/responses/{id}
//	DELETE /v1/responses/{id}
func (h *Handler) Register(mux Mux) {
	mux.HandleFunc("GET /v1/models", h.listModels)
	mux.HandleFunc("GET /v1/models/{id...}", h.getModel)
	mux.HandleFunc("POST /v1/chat/completions", h.chatCompletions)
	mux.HandleFunc("POST /v1/responses", h.createResponse)
	mux.HandleFunc("GET /v1/responses/{id}", h.getResponse)
	mux.HandleFunc("DELETE /v1/responses/{id}", h.deleteResponse)
}

// ServeHTTP serves the routes Register mounts; any other path under /v1/
// is answered with a 404 in OpenAI's error shape.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := h.mux.Handler(r); pattern == "" {
		WriteError(w, &Error{Status: http.StatusNotFound, Message: "unknown path " + r.Method + " " + r.URL.Path + ": this server has /v1/models, /v1/chat/completions and /v1/responses", Type: "invalid_request_error", Code: "unknown_url"})
		return
	}
	h.mux.ServeHTTP(w, r)
}
