package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nbots/nb/internal/retryafter"
)

// maxRetryAfter caps the wait a Retry-After header can ask for; a retry
// policy whose Max is shorter gives up on such an answer instead.
const maxRetryAfter = time.Hour

// Error is a failure reported by a provider's API, or met while talking to it.
type Error struct {
	// Provider is the provider id.
	Provider string
	// Status is the HTTP status; 0 when no response arrived.
	Status int
	// Message is the provider's own error text.
	Message string
	// Code is the provider's error code or type, when it gives one.
	Code string
	// Retryable says whether trying again may succeed (429, 5xx, network).
	Retryable bool
	// RetryAfter is the delay the provider asked for, zero when none.
	RetryAfter time.Duration
	// Hint tells the user what to check (the credential key on 401/403).
	Hint string
	// Streamed is true when part of the answer had already been delivered.
	Streamed bool
	// Err is the underlying error for network failures.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
		if t := http.StatusText(e.Status); t != "" {
			b.WriteString(" " + t)
		}
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Hint != "" {
		b.WriteString(" (" + e.Hint + ")")
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// IsRetryable reports whether err is worth another attempt: a provider
// error marked retryable, reached before any data was delivered.
func IsRetryable(err error) bool {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Retryable && !pe.Streamed
	}
	return false
}

// CredentialHints maps a provider id to the cartridge key a user should
// check when the provider answers 401 or 403.
var CredentialHints = map[string]string{}

// ErrorFromResponse reads an error response (status >= 400) and turns it
// into an *Error with the provider's own message. It closes the body.
func ErrorFromResponse(providerID string, resp *http.Response) *Error {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg, code := ParseErrorBody(body)
	if msg == "" {
		msg = strings.TrimSpace(string(body))
		if len(msg) > 500 {
			msg = msg[:500] + "..."
		}
	}
	if msg == "" {
		msg = "no error message in the response"
	}
	e := &Error{Provider: providerID, Status: resp.StatusCode, Message: msg, Code: code}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		e.Retryable = true
	case resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden:
		if key := CredentialHints[providerID]; key != "" {
			e.Hint = "check " + key
		}
	}
	e.RetryAfter = retryafter.Header(resp.Header.Get("Retry-After"), time.Now(), 0, maxRetryAfter)
	return e
}

// ParseErrorBody extracts a message and code from the error body shapes
// providers use: {"error": {"message", "code"|"type"}}, {"error": "text"},
// {"message": "text"} and {"detail": ...}. Empty strings when none matched.
func ParseErrorBody(body []byte) (message, code string) {
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		// Some providers answer with a JSON array of one error object.
		var arr []map[string]any
		if json.Unmarshal(body, &arr) != nil || len(arr) == 0 {
			return "", ""
		}
		v = arr[0]
	}
	str := func(x any) string {
		switch t := x.(type) {
		case string:
			return t
		case float64:
			return strconv.FormatFloat(t, 'f', -1, 64)
		case nil:
			return ""
		default:
			b, _ := json.Marshal(t)
			return string(b)
		}
	}
	switch e := v["error"].(type) {
	case string:
		return e, ""
	case map[string]any:
		message = str(e["message"])
		code = str(e["code"])
		if code == "" {
			code = str(e["type"])
		}
		if code == "" {
			code = str(e["status"])
		}
		return message, code
	}
	if m := str(v["message"]); m != "" {
		return m, str(v["code"])
	}
	if d := v["detail"]; d != nil {
		return str(d), ""
	}
	return "", ""
}

// Clip shortens s to its first 200 bytes, for quoting a response in an
// error message.
func Clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// UnsupportedError says a request asks for something the provider (or the
// API version the cartridge selected) cannot take, such as images. It is
// returned before anything is sent, so nothing is silently dropped; a
// server answers it with a 400 that names the cartridge.
type UnsupportedError struct {
	// Provider is the provider id.
	Provider string
	// Feature is what is not supported, in words: "images", "images given
	// by URL", "images in assistant messages".
	Feature string
	// Hint says what to do instead; may be empty.
	Hint string
}

func (e *UnsupportedError) Error() string {
	msg := e.Provider + ": " + e.Feature + " are not supported"
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Is makes errors.Is(err, errors.ErrUnsupported) true.
func (e *UnsupportedError) Is(target error) bool { return target == errors.ErrUnsupported }

// HostCredentialsError says a cartridge asks for credentials or files of
// the host (a key file path, application default credentials) while
// Config.AllowHostCredentials is off.
type HostCredentialsError struct {
	// Provider is the provider id.
	Provider string
	// What names what was asked for: "provider.credentials.file-path",
	// "application default credentials".
	What string
	// Hint says what the cartridge can give instead.
	Hint string
}

func (e *HostCredentialsError) Error() string {
	msg := e.Provider + ": " + e.What + " would use this host's credentials or files, which is not allowed for this cartridge (allow-host-credentials is off)"
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// contextLengthCodes are the error codes providers give a request longer
// than the model's context: OpenAI's (Chat Completions and Responses,
// and the compatible servers that copy it: Groq, DeepSeek, vLLM).
var contextLengthCodes = []string{"context_length_exceeded", "string_above_max_length", "request_too_large"}

// contextLengthPhrases are the words of the providers' messages for
// it, lower case: OpenAI ("maximum context length", "exceeds the context
// window"), Anthropic ("prompt is too long: 208000 tokens > 200000
// maximum", "input length and `max_tokens` exceed context limit"),
// Google ("The input token count (1054016) exceeds the maximum number of
// tokens allowed"), Mistral and vLLM ("too large for model with 32768
// maximum context length"), Cohere ("too many tokens"), Ollama ("the
// input length exceeds the context length"), llama.cpp ("exceeds the
// available context size"), Bedrock ("input is too long").
var contextLengthPhrases = []string{
	"maximum context length", "context length exceeded", "exceeds the context window", "context_length_exceeded",
	"prompt is too long", "exceed context limit",
	"input token count", "too large for model with",
	"too many tokens", "exceeds the context length", "exceeds the available context size",
	"input is too long", "context window exceeded", "reduce the length of the messages",
}

// IsContextLength reports whether err is a provider refusing a request
// that does not fit the model's context (a 400 or 413 with the
// provider's code or words for it): the conversation must shrink, and
// trying again as it is cannot succeed.
func IsContextLength(err error) bool {
	var pe *Error
	if !errors.As(err, &pe) || pe.Streamed {
		return false
	}
	if pe.Status != 0 && pe.Status != http.StatusBadRequest && pe.Status != http.StatusRequestEntityTooLarge && pe.Status != http.StatusUnprocessableEntity {
		return false
	}
	code := strings.ToLower(pe.Code)
	for _, c := range contextLengthCodes {
		if code == c {
			return true
		}
	}
	msg := strings.ToLower(pe.Message)
	for _, p := range contextLengthPhrases {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
