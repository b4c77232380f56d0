package feishu

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// ServeHTTP takes one request of the event callback: the URL check
// (url_verification) answered with its challenge, an event published and
// durable before the answer, so a failure makes the platform send it
// again. With an Encrypt Key the body must be encrypted with it, and its
// signature (when the request carries one) must match; the Verification
// Token must match in every case.
func (c *Channel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	if key := c.cfg.EncryptKey; key != "" {
		if sig := r.Header.Get("X-Lark-Signature"); sig != "" {
			want := Signature(r.Header.Get("X-Lark-Request-Timestamp"), r.Header.Get("X-Lark-Request-Nonce"), key, body)
			if !equalSecret(sig, want) {
				c.log.Warn("feishu: a callback with a wrong signature refused", "remote", r.RemoteAddr)
				http.Error(w, "wrong signature", http.StatusUnauthorized)
				return
			}
		}
		if env.Encrypt == "" {
			c.log.Warn("feishu: an unencrypted callback refused (channels.feishu.encryptKey is set)", "remote", r.RemoteAddr)
			http.Error(w, "not encrypted", http.StatusUnauthorized)
			return
		}
		plain, err := Decrypt(env.Encrypt, key)
		if err == nil {
			env = envelope{}
			err = json.Unmarshal(plain, &env)
		}
		if err != nil {
			c.log.Warn("feishu: a callback that does not decrypt refused", "remote", r.RemoteAddr, "err", err)
			http.Error(w, "does not decrypt", http.StatusUnauthorized)
			return
		}
	}
	token := env.Header.Token
	if env.Type == "url_verification" {
		token = env.Token
	}
	if c.hook == "" || !equalSecret(token, c.cfg.VerificationToken) {
		c.log.Warn("feishu: a callback without the verification token refused", "remote", r.RemoteAddr)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if env.Type == "url_verification" {
		json.NewEncoder(w).Encode(map[string]string{"challenge": env.Challenge}) //nolint:errcheck // the platform asks again
		return
	}
	c.mu.Lock()
	in := c.inbox
	c.mu.Unlock()
	if in == nil {
		http.Error(w, "not receiving yet", http.StatusServiceUnavailable)
		return
	}
	m, ok := c.inbound(r.Context(), in, env)
	if ok {
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		err := in.Publish(ctx, m)
		cancel()
		if err != nil {
			c.log.Warn("feishu: publishing a callback event (the platform will send it again)", "err", err, "message", m.ID)
			http.Error(w, "not stored, try again", http.StatusServiceUnavailable)
			return
		}
	}
	io.WriteString(w, "{}\n") //nolint:errcheck // the platform retries an event it did not see answered
	if ok {
		// The answer goes out first: the platform waits 3 s for it.
		http.NewResponseController(w).Flush() //nolint:errcheck // a writer that cannot flush answers when the handler returns
		c.react(context.WithoutCancel(r.Context()), m.ID)
	}
}
