package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/telegram/botapi"
)

var (
	webhookSecret = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{16,256}$`) })
	webhookPath   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)+/?$`) })
)

// reservedPaths are the listener's own routes.
var reservedPaths = map[string]bool{"/ws": true, "/health": true, "/ready": true}

// checkWebhook checks the webhook settings and returns the path the
// gateway serves the channel at ("" without a webhook).
func checkWebhook(cfg Config) (string, error) {
	if cfg.WebhookURL == "" {
		if cfg.WebhookSecret != "" {
			return "", fmt.Errorf("channels.telegram.webhookSecret is set without webhookUrl")
		}
		return "", nil
	}
	u, err := url.Parse(cfg.WebhookURL)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("channels.telegram.webhookUrl %q is not a URL without query or user", cfg.WebhookURL)
	}
	loopback := false
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsLoopback() || u.Hostname() == "localhost" {
		loopback = true
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && loopback) {
		return "", fmt.Errorf("channels.telegram.webhookUrl must be https (Telegram calls only https; http is allowed for a loopback test server)")
	}
	if !webhookPath().MatchString(u.Path) || reservedPaths[u.Path] {
		return "", fmt.Errorf("channels.telegram.webhookUrl needs a path of its own (such as /telegram/<random>), not %q", u.Path)
	}
	if !webhookSecret().MatchString(cfg.WebhookSecret) {
		return "", fmt.Errorf("channels.telegram.webhookSecret must be 16 to 256 characters of A-Z, a-z, 0-9, _ and - (Telegram's secret_token)")
	}
	return u.Path, nil
}

// WebhookPath is where the gateway's listener serves the channel: the
// path of webhookUrl, "" when the channel polls.
func (c *Channel) WebhookPath() string { return c.webhookPath }

// runWebhook registers the webhook (one connection at a time, so updates
// arrive in order) and serves it until ctx ends. The webhook stays set
// when the gateway stops: Telegram keeps the updates that fail to arrive
// and delivers them to the next run.
func (c *Channel) runWebhook(ctx context.Context, in channel.Inbox, ready func(), b *channel.Backoff, cursor channel.Cursor, offset int64) error {
	ok, err := channel.Retry(ctx, c.log, "telegram: setting the webhook", b, func(ctx context.Context) error {
		rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
		defer cancel()
		return c.api.SetWebhook(rctx, botapi.SetWebhook{URL: c.cfg.WebhookURL, SecretToken: c.cfg.WebhookSecret, AllowedUpdates: []string{"message"}, MaxConnections: 1})
	}, classify)
	if !ok {
		return err
	}
	c.hookMu.Lock()
	c.hook = &hookState{in: in, cursor: cursor, offset: offset}
	c.hookMu.Unlock()
	c.log.Info("telegram: receiving by webhook", "path", c.webhookPath)
	c.link.Up()
	ready()
	<-ctx.Done()
	c.hookMu.Lock()
	c.hook = nil
	c.hookMu.Unlock()
	return nil
}

// ServeHTTP takes one update from Telegram: the secret checked, the
// message published and durable before the answer, so a failure makes
// Telegram deliver it again; an update at or before the saved position
// is acknowledged and dropped.
func (c *Channel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	got := r.Header.Get(botapi.SecretHeader)
	if c.webhookPath == "" || subtle.ConstantTimeCompare([]byte(got), []byte(c.cfg.WebhookSecret)) != 1 {
		c.log.Warn("telegram: a webhook request without the secret refused", "remote", r.RemoteAddr)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable update", http.StatusBadRequest)
		return
	}
	var u botapi.Update
	if err := json.Unmarshal(body, &u); err != nil || u.UpdateID == 0 {
		http.Error(w, "not an update", http.StatusBadRequest)
		return
	}
	// One at a time: the position moves in order.
	c.hookMu.Lock()
	defer c.hookMu.Unlock()
	h := c.hook
	if h == nil {
		http.Error(w, "not receiving yet", http.StatusServiceUnavailable)
		return
	}
	if u.UpdateID < h.offset {
		return // already published
	}
	if u.Message != nil {
		m, ok := c.inbound(r.Context(), h.in, u.Message)
		if ok {
			ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
			err := h.in.Publish(ctx, m)
			cancel()
			if err != nil {
				c.log.Warn("telegram: publishing a webhook update (Telegram will retry)", "err", err, "update", u.UpdateID)
				http.Error(w, "not stored, try again", http.StatusServiceUnavailable)
				return
			}
		}
	}
	h.offset = u.UpdateID + 1
	if err := h.cursor.Save(r.Context(), strconv.FormatInt(h.offset, 10)); err != nil {
		c.log.Error("telegram: saving the update offset", "err", err)
	}
}

var _ channel.Webhook = (*Channel)(nil)
