package feishu

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
	"time"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/internal/retryafter"
)

// apiError is the open platform's answer to a request that failed: its
// HTTP status, its code and message, and how long to wait when it is a
// rate limit.
type apiError struct {
	Op         string
	Status     int
	Code       int
	Msg        string
	RetryAfter time.Duration
}

func (e *apiError) Error() string {
	return fmt.Sprintf("feishu %s: code %d: %s (HTTP %d)", e.Op, e.Code, e.Msg, e.Status)
}

// Codes the client acts on (open.feishu.cn/document/server-docs/api-call-guide/generic-error-code).
const (
	codeRateLimited  = 99991400 // the app's or tenant's request frequency limit
	codeChatLimited  = 230020   // this chat's message frequency limit
	codeTokenInvalid = 99991663
	codeTokenExpired = 99991677
	codeTokenBad     = 99991661
)

// rateLimited reports whether e asks to slow down.
func (e *apiError) rateLimited() bool {
	return e.Status == http.StatusTooManyRequests || e.Code == codeRateLimited || e.Code == codeChatLimited
}

// client speaks the open platform's server API with the app's tenant
// access token, fetched and refreshed before it expires.
type client struct {
	base      string // https://open.feishu.cn, no trailing slash
	appID     string
	appSecret string
	hc        *http.Client

	token channel.AccessToken // the tenant's
}

// newClient is a client of the API at base for the app.
func newClient(base, appID, appSecret string, hc *http.Client) *client {
	c := &client{base: base, appID: appID, appSecret: appSecret, hc: hc}
	c.token = channel.AccessToken{Fetch: c.fetchTenantToken, Margin: refreshMargin, KeepOnFailure: true}
	return c
}

// refreshMargin is how long before its expiry a token is replaced: the
// platform hands out a new token only when the current one has less than
// 30 minutes left, so the margin stays under that.
const refreshMargin = 25 * time.Minute

// tenantToken returns a valid tenant access token, fetching a new one
// when the current one is missing or within refreshMargin of its expiry.
func (c *client) tenantToken(ctx context.Context) (string, error) {
	return c.token.Get(ctx)
}

// fetchTenantToken asks the platform for a tenant access token.
func (c *client) fetchTenantToken(ctx context.Context) (string, time.Duration, error) {
	var out struct {
		Code   int    `json:"code"`
		Msg    string `json:"msg"`
		Token  string `json:"tenant_access_token"`
		Expire int    `json:"expire"`
	}
	body, _ := json.Marshal(map[string]string{"app_id": c.appID, "app_secret": c.appSecret})
	if err := c.do(ctx, "tenant_access_token", http.MethodPost, "/open-apis/auth/v3/tenant_access_token/internal", "", "application/json; charset=utf-8", bytes.NewReader(body), &out); err != nil {
		return "", 0, err
	}
	if out.Token == "" {
		return "", 0, &apiError{Op: "tenant_access_token", Status: 200, Code: out.Code, Msg: "no token in the answer"}
	}
	return out.Token, time.Duration(out.Expire) * time.Second, nil
}

// forget drops the token after the platform refused it.
func (c *client) forget(token string) { c.token.Forget(token) }

// call sends an authorised JSON request and decodes the answer's data
// into out (nil: ignored). A token the platform refuses is replaced once.
func (c *client) call(ctx context.Context, op, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		body, _ = json.Marshal(in)
	}
	for try := 0; ; try++ {
		tok, err := c.tenantToken(ctx)
		if err != nil {
			return err
		}
		var env struct {
			Code int             `json:"code"`
			Msg  string          `json:"msg"`
			Data json.RawMessage `json:"data"`
		}
		err = c.do(ctx, op, method, path, tok, "application/json; charset=utf-8", bytes.NewReader(body), &env)
		var ae *apiError
		if errors.As(err, &ae) && try == 0 && (ae.Code == codeTokenInvalid || ae.Code == codeTokenExpired || ae.Code == codeTokenBad) {
			c.forget(tok)
			continue
		}
		if err != nil {
			return err
		}
		if out != nil && len(env.Data) > 0 {
			if err := json.Unmarshal(env.Data, out); err != nil {
				return fmt.Errorf("feishu %s: unreadable answer: %w", op, err)
			}
		}
		return nil
	}
}

// do sends one request and decodes its JSON answer into out, turning a
// non-zero code or an HTTP failure into an *apiError.
func (c *client) do(ctx context.Context, op, method, path, token, ctype string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ctype)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("feishu %s: %w", op, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("feishu %s: reading the answer: %w", op, err)
	}
	var head struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	}
	jerr := json.Unmarshal(raw, &head)
	if resp.StatusCode/100 != 2 || jerr != nil || head.Code != 0 {
		e := &apiError{Op: op, Status: resp.StatusCode, Code: head.Code, Msg: head.Msg}
		if jerr != nil {
			e.Msg = "answer not JSON: " + http.StatusText(resp.StatusCode)
		}
		if e.rateLimited() {
			e.RetryAfter = resetWait(resp.Header.Get("x-ogw-ratelimit-reset"))
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("feishu %s: unreadable answer: %w", op, err)
		}
	}
	return nil
}

// endpoint is the long connection's address and settings.
type endpoint struct {
	URL          string       `json:"URL"`
	ClientConfig clientConfig `json:"ClientConfig"`
}

// clientConfig are the connection settings the platform sends (in the
// endpoint's answer and in pongs); intervals are in seconds.
type clientConfig struct {
	ReconnectCount    int `json:"ReconnectCount"`
	ReconnectInterval int `json:"ReconnectInterval"`
	ReconnectNonce    int `json:"ReconnectNonce"`
	PingInterval      int `json:"PingInterval"`
}

// wsEndpoint asks for a long connection's address with the app's
// credentials (no token: the endpoint takes AppID and AppSecret).
func (c *client) wsEndpoint(ctx context.Context) (endpoint, error) {
	body, _ := json.Marshal(map[string]string{"AppID": c.appID, "AppSecret": c.appSecret})
	var out struct {
		Data endpoint `json:"data"`
	}
	if err := c.do(ctx, "callback/ws/endpoint", http.MethodPost, "/callback/ws/endpoint", "", "application/json; charset=utf-8", bytes.NewReader(body), &out); err != nil {
		return endpoint{}, err
	}
	if out.Data.URL == "" {
		return endpoint{}, &apiError{Op: "callback/ws/endpoint", Status: 200, Msg: "no URL in the answer"}
	}
	return out.Data, nil
}

// botInfo returns the bot's own open_id, which tells a mention of it
// apart from a mention of someone else.
func (c *client) botInfo(ctx context.Context) (string, error) {
	tok, err := c.tenantToken(ctx)
	if err != nil {
		return "", err
	}
	var out struct {
		Bot struct {
			OpenID string `json:"open_id"`
		} `json:"bot"`
	}
	if err := c.do(ctx, "bot/v3/info", http.MethodGet, "/open-apis/bot/v3/info", tok, "application/json", nil, &out); err != nil {
		return "", err
	}
	return out.Bot.OpenID, nil
}

// sendMessage posts a message and returns its id; uuid makes a repeated
// request (the same piece of the same answer) post once.
func (c *client) sendMessage(ctx context.Context, idType, receiveID, msgType, content, uuid string) (string, error) {
	in := map[string]string{"receive_id": receiveID, "msg_type": msgType, "content": content}
	if uuid != "" {
		in["uuid"] = uuid
	}
	var out struct {
		MessageID string `json:"message_id"`
	}
	err := c.call(ctx, "im/v1/messages", http.MethodPost, "/open-apis/im/v1/messages?receive_id_type="+url.QueryEscape(idType), in, &out)
	return out.MessageID, err
}

// patchCard replaces the card of an interactive message the bot sent.
func (c *client) patchCard(ctx context.Context, id, card string) error {
	return c.call(ctx, "im/v1/messages patch", http.MethodPatch, "/open-apis/im/v1/messages/"+url.PathEscape(id), map[string]string{"content": card}, nil)
}

// upload sends an image (kind "image") or a file and returns its key.
func (c *client) upload(ctx context.Context, kind, fileType, name string, data []byte) (string, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	path, field := "/open-apis/im/v1/files", "file"
	if kind == "image" {
		path, field = "/open-apis/im/v1/images", "image"
		mw.WriteField("image_type", "message") //nolint:errcheck // into a buffer
	} else {
		mw.WriteField("file_type", fileType) //nolint:errcheck // into a buffer
		mw.WriteField("file_name", name)     //nolint:errcheck // into a buffer
	}
	w, _ := mw.CreateFormFile(field, name)
	w.Write(data) //nolint:errcheck // into a buffer
	mw.Close()    //nolint:errcheck // into a buffer
	tok, err := c.tenantToken(ctx)
	if err != nil {
		return "", err
	}
	var out struct {
		Data struct {
			ImageKey string `json:"image_key"`
			FileKey  string `json:"file_key"`
		} `json:"data"`
	}
	if err := c.do(ctx, "upload "+kind, http.MethodPost, path, tok, mw.FormDataContentType(), &buf, &out); err != nil {
		return "", err
	}
	if kind == "image" {
		return out.Data.ImageKey, nil
	}
	return out.Data.FileKey, nil
}

// resetWait is the wait a rate-limited answer's x-ogw-ratelimit-reset
// (seconds until the limit resets) asks for: a second when it names
// none, at most maxRetryAfter, so that an absurd value neither overflows
// into a negative wait nor parks the chat for years.
func resetWait(h string) time.Duration {
	s, err := strconv.Atoi(h)
	if err != nil {
		return time.Second
	}
	return retryafter.Seconds(float64(s), time.Second, maxRetryAfter)
}

// maxRetryAfter caps the wait x-ogw-ratelimit-reset can ask for.
const maxRetryAfter = time.Hour
