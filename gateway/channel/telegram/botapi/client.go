package botapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nbots/nb/internal/retryafter"
)

// DefaultBase is Telegram's Bot API server.
const DefaultBase = "https://api.telegram.org"

// maxResponse bounds an answer's body: getUpdates with 100 updates is far
// below it.
const maxResponse = 16 << 20

// Client calls the Bot API as one bot.
type Client struct {
	// Base is the server's URL (DefaultBase if ""), a self-hosted Bot API
	// server's, or a fake's.
	Base  string
	Token string
	// HTTP sends the requests (http.DefaultClient if nil).
	HTTP *http.Client
}

// Error is the API's answer to a failed request, or the HTTP status of a
// server that did not answer in the API's format.
type Error struct {
	Method      string
	Code        int
	Description string
	// RetryAfter is how long to wait after a 429 (at most maxRetryAfter).
	RetryAfter time.Duration
	// MigrateTo is the supergroup a group became (400 with
	// migrate_to_chat_id).
	MigrateTo int64
}

func (e *Error) Error() string {
	return fmt.Sprintf("telegram %s: %d %s", e.Method, e.Code, e.Description)
}

// redactedError is a transport failure whose text had the token removed
// (Go's HTTP errors quote the URL, and Telegram's URLs hold the token).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Redact replaces the token wherever it appears in err's text; what it
// wraps is kept, minus the URL of a *url.Error (it holds the token).
func (c *Client) Redact(err error) error {
	if err == nil {
		return nil
	}
	inner := err
	var ue *url.Error
	if errors.As(err, &ue) {
		inner = ue.Err
	}
	msg := err.Error()
	if c.Token != "" {
		msg = strings.ReplaceAll(msg, c.Token, "<token>")
		msg = strings.ReplaceAll(msg, url.PathEscape(c.Token), "<token>")
	}
	return &redactedError{msg: msg, err: inner}
}

func (c *Client) base() string {
	if c.Base == "" {
		return DefaultBase
	}
	return strings.TrimRight(c.Base, "/")
}

func (c *Client) http() *http.Client {
	if c.HTTP == nil {
		return http.DefaultClient
	}
	return c.HTTP
}

// Call posts params as JSON to the method and decodes its result into
// result (which may be nil).
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	body, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("telegram %s: %w", method, err)
	}
	return c.do(ctx, method, bytes.NewReader(body), "application/json", result)
}

// SendFile uploads a file with a method that takes one (sendPhoto with
// field "photo", sendDocument with "document"), as multipart/form-data.
func (c *Client) SendFile(ctx context.Context, method, field string, chatID int64, name string, data []byte) (Message, error) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.WriteField("chat_id", strconv.FormatInt(chatID, 10)) //nolint:errcheck // a buffer
	fw, err := mw.CreateFormFile(field, name)
	if err != nil {
		return Message{}, fmt.Errorf("telegram %s: %w", method, err)
	}
	fw.Write(data) //nolint:errcheck // a buffer
	mw.Close()     //nolint:errcheck // a buffer
	var m Message
	err = c.do(ctx, method, &b, mw.FormDataContentType(), &m)
	return m, err
}

// do posts body to the method and decodes the answer.
func (c *Client) do(ctx context.Context, method string, body io.Reader, contentType string, result any) error {
	u := c.base() + "/bot" + c.Token + "/" + method
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return c.Redact(fmt.Errorf("telegram %s: %w", method, err))
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.http().Do(req)
	if err != nil {
		return c.Redact(fmt.Errorf("telegram %s: %w", method, err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return c.Redact(fmt.Errorf("telegram %s: reading the answer: %w", method, err))
	}
	var r Response[json.RawMessage]
	if err := json.Unmarshal(data, &r); err != nil || (!r.OK && r.ErrorCode == 0) {
		// A proxy's or load balancer's page, not the API's answer.
		return &Error{Method: method, Code: resp.StatusCode, Description: strings.TrimSpace(http.StatusText(resp.StatusCode) + " (not a Bot API answer)")}
	}
	if !r.OK {
		e := &Error{Method: method, Code: r.ErrorCode, Description: r.Description}
		if p := r.Parameters; p != nil {
			// Capped: an absurd retry_after must not overflow into a
			// negative wait or park the chat for years.
			e.RetryAfter = retryafter.Seconds(float64(p.RetryAfter), 0, maxRetryAfter)
			e.MigrateTo = p.MigrateToChatID
		}
		if e.Code == http.StatusTooManyRequests && e.RetryAfter <= 0 {
			e.RetryAfter = time.Second
		}
		return e
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(r.Result, result); err != nil {
		return fmt.Errorf("telegram %s: unexpected result: %w", method, err)
	}
	return nil
}

// GetMe returns the bot itself.
func (c *Client) GetMe(ctx context.Context) (User, error) {
	var u User
	err := c.Call(ctx, "getMe", struct{}{}, &u)
	return u, err
}

// GetUpdates long-polls for updates from p.Offset on.
func (c *Client) GetUpdates(ctx context.Context, p GetUpdates) ([]Update, error) {
	var us []Update
	err := c.Call(ctx, "getUpdates", p, &us)
	return us, err
}

// SendMessage sends a text message.
func (c *Client) SendMessage(ctx context.Context, p SendMessage) (Message, error) {
	var m Message
	err := c.Call(ctx, "sendMessage", p, &m)
	return m, err
}

// EditMessageText replaces the text of a message the bot sent.
func (c *Client) EditMessageText(ctx context.Context, p EditMessageText) (Message, error) {
	var m Message
	err := c.Call(ctx, "editMessageText", p, &m)
	return m, err
}

// SendChatAction shows an action ("typing") in a chat for a few seconds.
func (c *Client) SendChatAction(ctx context.Context, chatID int64, action string) error {
	return c.Call(ctx, "sendChatAction", map[string]any{"chat_id": chatID, "action": action}, nil)
}

// GetFile prepares a file for download.
func (c *Client) GetFile(ctx context.Context, fileID string) (File, error) {
	var f File
	err := c.Call(ctx, "getFile", map[string]string{"file_id": fileID}, &f)
	return f, err
}

// FileURL is where a file prepared by GetFile is downloaded. It holds the
// token: never print it.
func (c *Client) FileURL(filePath string) (string, error) {
	if filePath == "" || strings.HasPrefix(filePath, "/") || strings.Contains(filePath, "..") || strings.ContainsAny(filePath, "?#\\") {
		return "", fmt.Errorf("telegram getFile: unusable file path %q", filePath)
	}
	return c.base() + "/file/bot" + c.Token + "/" + filePath, nil
}

// SetWebhook makes Telegram deliver updates by HTTPS POSTs to p.URL
// instead of getUpdates.
func (c *Client) SetWebhook(ctx context.Context, p SetWebhook) error {
	return c.Call(ctx, "setWebhook", p, nil)
}

// DeleteWebhook goes back to getUpdates; the updates waiting are kept.
func (c *Client) DeleteWebhook(ctx context.Context) error {
	return c.Call(ctx, "deleteWebhook", map[string]any{"drop_pending_updates": false}, nil)
}

// BotCommand is one entry of the bot's command menu.
type BotCommand struct {
	// Command is 1 to 32 lowercase letters, digits and underscores, no /.
	Command string `json:"command"`
	// Description is 1 to 256 characters.
	Description string `json:"description"`
}

// SetMyCommands sets the command menu the users' apps show (the default
// scope, every language).
func (c *Client) SetMyCommands(ctx context.Context, commands []BotCommand) error {
	return c.Call(ctx, "setMyCommands", map[string]any{"commands": commands}, nil)
}

// maxRetryAfter caps the wait a 429's retry_after can ask for.
const maxRetryAfter = time.Hour
