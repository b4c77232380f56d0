package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/internal/httpjson"
	"github.com/nbots/nb/provider"
)

// Error is a failure a front-end answers with: a status, a message for
// the client and, for the OpenAI-compatible routes, OpenAI's type, param
// and code. Every error the core returns (Bot, Admit, ClientBot) is an
// *Error.
type Error struct {
	Status  int
	Message string
	// Type, Param and Code fill OpenAI's error object; "" picks the type
	// and code that go with Status.
	Type, Param, Code string
	// RetryAfter, when set, is sent as Retry-After (429).
	RetryAfter time.Duration
	// Err is the cause, kept for the log.
	Err error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// StatusCode is the HTTP status to answer with.
func (e *Error) StatusCode() int { return e.Status }

// Errorf returns an *Error with status and a formatted message.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// ErrRunTimeout is the cause of a run stopped by its deadline (wrapped
// with the name of the limit when Limits.Names gives one).
var ErrRunTimeout = errors.New("the run took longer than the server's limit per run")

// ErrShutdown is the cause of a run stopped because the server stops.
var ErrShutdown = errors.New("the server is shutting down")

// ErrClientGone is the cause of a run stopped because its client went away.
var ErrClientGone = errors.New("the client went away")

// AsError turns any error of a run into an *Error with the status that
// fits it: a provider's failure is 502, a run stopped by its deadline 504,
// a busy state key 409, a broken cartridge 400, a failure of nb itself
// 500. ctx is the run's context: its cause says why a cancelled run
// stopped.
func AsError(ctx context.Context, err error) *Error {
	var se *Error
	if errors.As(err, &se) {
		return se
	}
	if ctx != nil && ctx.Err() != nil {
		cause := context.Cause(ctx)
		switch {
		case errors.Is(cause, ErrRunTimeout):
			return &Error{Status: http.StatusGatewayTimeout, Message: cause.Error(), Err: err}
		case errors.Is(cause, ErrShutdown):
			return &Error{Status: http.StatusServiceUnavailable, Message: "the run was stopped: " + ErrShutdown.Error(), Err: err}
		default:
			return &Error{Status: 499, Message: "the run was stopped: " + ErrClientGone.Error(), Err: err}
		}
	}
	var pe *provider.Error
	if errors.As(err, &pe) {
		msg := pe.Error()
		if pe.Status == http.StatusUnauthorized || pe.Status == http.StatusForbidden {
			// The provider's own text may quote part of the key; the
			// operator reads it in the log.
			msg = fmt.Sprintf("%s refused the credentials of this cartridge (HTTP %d); the server's operator can read why in its log", pe.Provider, pe.Status)
		}
		e := &Error{Status: http.StatusBadGateway, Message: msg, Err: err}
		if pe.Status == http.StatusTooManyRequests {
			e.Status, e.RetryAfter = http.StatusTooManyRequests, pe.RetryAfter
		}
		return e
	}
	var be *bot.BusyError
	if errors.As(err, &be) {
		return &Error{Status: http.StatusConflict, Message: be.Error(), Err: err}
	}
	var ce *cartridge.Error
	if errors.As(err, &ce) {
		return &Error{Status: http.StatusBadRequest, Message: ce.Error(), Err: err}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the request body is larger than the server's limit of %d bytes", mbe.Limit), Err: err}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Status: http.StatusGatewayTimeout, Message: err.Error(), Err: err}
	}
	return &Error{Status: http.StatusInternalServerError, Message: err.Error(), Err: err}
}

// WriteError answers r with err in the shape of r's route family:
// OpenAI's {"error":{"message","type","param","code"}} under /v1/, the
// Nano Bots API's {"error":{"message"}} elsewhere. A PanicError's stack
// goes to the log, never to the client.
func (s *Server) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	e := AsError(r.Context(), err)
	if info := infoFrom(r.Context()); info != nil {
		info.err = e
	}
	status := e.Status
	if status == 499 {
		// Nobody reads it; the log says 499.
		status = http.StatusBadRequest
	}
	if e.RetryAfter > 0 || status == http.StatusTooManyRequests {
		secs := int((e.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="nb"`)
	}
	if IsOpenAIPath(r.URL.Path) {
		typ, code := e.Type, e.Code
		if typ == "" {
			typ = OpenAIErrorType(status)
		}
		if code == "" {
			code = openAICode(status)
		}
		WriteJSON(w, status, openAIErrorJSON{Error: openAIErrorBody{Message: e.Message, Type: typ, Param: nullable(e.Param), Code: nullable(code)}})
		return
	}
	WriteJSON(w, status, errorJSON{Error: errorBody{Message: e.Message}})
}

type errorJSON struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Message string `json:"message"`
}

type openAIErrorJSON struct {
	Error openAIErrorBody `json:"error"`
}

type openAIErrorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    any    `json:"code"`
}

// IsOpenAIPath reports whether path belongs to the OpenAI-compatible
// routes (under /v1/), whose errors take OpenAI's shape.
func IsOpenAIPath(path string) bool { return path == "/v1" || strings.HasPrefix(path, "/v1/") }

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// OpenAIErrorType is the type of OpenAI's error object for an HTTP
// status.
func OpenAIErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func openAICode(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "invalid_api_key"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusGatewayTimeout:
		return "timeout"
	}
	return ""
}

// WriteJSON answers with v as JSON (see httpjson.Write): in one write
// with a Content-Length, without HTML escaping.
func WriteJSON(w http.ResponseWriter, status int, v any) { httpjson.Write(w, status, v) }

// MarshalJSON encodes v without HTML escaping and without a trailing newline.
func MarshalJSON(v any) ([]byte, error) { return httpjson.Marshal(v) }
