package openaiapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/server"
)

// Error is an error in OpenAI's shape, with the HTTP status it is sent
// with: {"error": {"message", "type", "param", "code"}}.
type Error struct {
	Status  int
	Message string
	// Type is OpenAI's error type: invalid_request_error, server_error...
	Type string
	// Param names the request field at fault, "" when none.
	Param string
	// Code is a machine-readable code, "" when none.
	Code string
	// RetryAfter, when positive, is sent as a Retry-After header.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Message }

// MarshalJSON encodes the error body, with null for an empty param or code.
func (e *Error) MarshalJSON() ([]byte, error) {
	type body struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	b := body{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		b.Param = &e.Param
	}
	if e.Code != "" {
		b.Code = &e.Code
	}
	return json.Marshal(struct {
		Error body `json:"error"`
	}{b})
}

// WriteError answers with e in OpenAI's shape. A server mounting the
// handlers uses it for its own errors on these paths (a bad token, a
// limit), so clients see one shape.
func WriteError(w http.ResponseWriter, e *Error) {
	body, _ := e.MarshalJSON()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	w.WriteHeader(e.Status)
	w.Write(append(body, '\n')) //nolint:errcheck // the client may have gone
}

// badRequest is a 400 naming the field at fault.
func badRequest(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...), Type: "invalid_request_error", Param: param}
}

// statusCoder is what the catalog's errors may implement.
type statusCoder interface{ StatusCode() int }

// timeoutError is what time-limit errors implement (provider time limits,
// net.Error).
type timeoutError interface{ Timeout() bool }

// apiError turns the error of a request into what the client receives;
// model names the cartridge the request asked for.
func apiError(err error, model string, providerID string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var se *server.Error
	if errors.As(err, &se) && se.Status != 0 {
		// The server's own refusal (a limit, a token, a cartridge that
		// failed to load), in OpenAI's shape.
		out := &Error{Status: se.Status, Message: se.Message, Type: se.Type, Param: se.Param, Code: se.Code, RetryAfter: se.RetryAfter}
		if out.Type == "" {
			out.Type = server.OpenAIErrorType(se.Status)
		}
		if out.Param == "" && (se.Status == http.StatusNotFound || se.Status == http.StatusForbidden) {
			out.Param = "model"
		}
		if se.Status == http.StatusTooManyRequests && out.RetryAfter <= 0 {
			out.RetryAfter = time.Second
		}
		return out
	}
	var maxBytes *http.MaxBytesError
	if errors.As(err, &maxBytes) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the request body is larger than this server accepts (%d bytes)", maxBytes.Limit), Type: "invalid_request_error", Code: "request_too_large"}
	}
	var busy *bot.BusyError
	if errors.As(err, &busy) {
		return &Error{Status: http.StatusTooManyRequests, Message: busy.Error(), Type: "rate_limit_error", Code: "busy", RetryAfter: time.Second}
	}
	var sc statusCoder
	if errors.As(err, &sc) {
		status := sc.StatusCode()
		out := &Error{Status: status, Message: err.Error(), Type: "invalid_request_error", Param: "model"}
		switch status {
		case http.StatusNotFound:
			out.Code = "model_not_found"
		case http.StatusForbidden:
			out.Code = "model_not_allowed"
		case http.StatusTooManyRequests:
			out.Type, out.Code, out.Param = "rate_limit_error", "rate_limit_exceeded", ""
		default:
			if status >= 500 {
				out.Type, out.Param = "server_error", ""
			}
		}
		return out
	}
	if errors.Is(err, errors.ErrUnsupported) {
		// A provider refused part of the request before sending it
		// (images to a provider without them): the client's to change.
		return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("model %s (provider %s) cannot take this request: %v", model, providerID, err), Type: "invalid_request_error", Code: "unsupported_by_provider"}
	}
	var te timeoutError
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &te) && te.Timeout()) {
		return &Error{Status: http.StatusGatewayTimeout, Message: fmt.Sprintf("model %s: %v", model, err), Type: "server_error", Code: "timeout"}
	}
	var pe *provider.Error
	if errors.As(err, &pe) {
		e := &Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("model %s: the provider failed: %v", model, pe), Type: "upstream_error", Code: pe.Code}
		switch pe.Status {
		case http.StatusUnauthorized, http.StatusForbidden:
			// The provider's text may quote part of the cartridge's key:
			// the client is told what happened, the log says the rest.
			e.Message = fmt.Sprintf("model %s: the provider %s refused the credentials of this cartridge (HTTP %d); the server's operator can read why in its log", model, pe.Provider, pe.Status)
		case http.StatusTooManyRequests:
			// Over the provider's limit: the client may try again later.
			e.Status, e.Type, e.RetryAfter = http.StatusTooManyRequests, "rate_limit_error", max(pe.RetryAfter, time.Second)
			e.Message = fmt.Sprintf("model %s: the provider is over its rate limit: %v", model, pe)
		}
		return e
	}
	var panicked *bot.PanicError
	if errors.As(err, &panicked) {
		return &Error{Status: http.StatusInternalServerError, Message: panicked.Error(), Type: "server_error", Code: "internal_error"}
	}
	return &Error{Status: http.StatusInternalServerError, Message: fmt.Sprintf("model %s: %v", model, err), Type: "server_error"}
}
