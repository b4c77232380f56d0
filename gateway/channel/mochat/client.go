package mochat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/internal/retryafter"
)

func errorsAs[T error](err error, target *T) bool { return errors.As(err, target) }

// client is the claw HTTP API.
type client struct {
	base  string
	token string
	hc    *http.Client
}

func newClient(cfg Config) *client {
	return &client{
		base:  strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/"),
		token: cfg.ClawToken,
		// Longer than a watch's long poll.
		hc: &http.Client{Timeout: ms(cfg.WatchTimeoutMs, 25000) + 15*time.Second},
	}
}

// authError is the server's refusal of the claw token: no retry cures it.
type authError struct{ status string }

func (e *authError) Error() string {
	return "mochat refused channels.mochat.clawToken (" + e.status + "): check the agent's token"
}

// post calls path with body and decodes the answer's data into out:
// Mochat wraps it as {"code":200,"data":…} (anything else is an error),
// or answers the object itself.
func (c *client) post(ctx context.Context, path string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("mochat %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Claw-Token", c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("mochat %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("mochat %s: reading the answer: %w", path, err)
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return &channel.RetryAfter{After: retryAfter(resp.Header.Get("Retry-After")), Err: fmt.Errorf("mochat %s: %s", path, resp.Status)}
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return &authError{status: resp.Status}
	case resp.StatusCode == http.StatusNotFound && strings.HasSuffix(path, "/send"):
		return &channel.Undeliverable{Reason: "mochat " + path + ": " + resp.Status}
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("mochat %s: HTTP %s: %.200s", path, resp.Status, data)
	}
	var env struct {
		Code    *int            `json:"code"`
		Message string          `json:"message"`
		Name    string          `json:"name"`
		Data    json.RawMessage `json:"data"`
	}
	if json.Unmarshal(data, &env) == nil && env.Code != nil {
		switch {
		case *env.Code == 429:
			return &channel.RetryAfter{After: time.Second, Err: fmt.Errorf("mochat %s: %s", path, env.Message)}
		case *env.Code == 401 || *env.Code == 403:
			return &authError{status: strconv.Itoa(*env.Code) + " " + env.Message}
		case *env.Code != 200:
			msg := env.Message
			if msg == "" {
				msg = env.Name
			}
			return fmt.Errorf("mochat %s: API error %d: %s", path, *env.Code, msg)
		}
		data = env.Data
	}
	if out == nil || len(data) == 0 || string(data) == "null" {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("mochat %s: unreadable answer: %w", path, err)
	}
	return nil
}

// retryAfter is the wait a 429's Retry-After header asks for (seconds or
// an HTTP-date), a second when it names none, at most maxRetryAfter.
func retryAfter(h string) time.Duration {
	return retryafter.Header(h, time.Now(), time.Second, maxRetryAfter)
}

// maxRetryAfter caps the wait the server can ask for.
const maxRetryAfter = time.Hour
