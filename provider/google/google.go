// Package google speaks to Gemini models through Google's two REST APIs:
// the Generative Language API with an API key
// (https://ai.google.dev/api/generate-content) and Vertex AI with OAuth
// tokens from a service-account key or Application Default Credentials
// (https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference).
// Both take the same generateContent body; streaming uses
// :streamGenerateContent?alt=sse, whose server-sent events each carry a
// whole GenerateContentResponse and which ends when the HTTP response ends.
package google

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/provider"
)

// ID is the cartridge's provider id.
const ID = "google"

// The two values of provider.credentials.service.
const (
	ServiceGenerativeLanguage = "generative-language-api"
	ServiceVertex             = "vertex-ai-api"
)

// Default addresses and API versions.
const (
	GenerativeLanguageAddress = "https://generativelanguage.googleapis.com"
	// GenerativeLanguageVersion is v1beta: the version that takes
	// systemInstruction, tools and thinking settings (v1 refused
	// system_instruction when the reference used it: its issue #21).
	GenerativeLanguageVersion = "v1beta"
	VertexVersion             = "v1"
)

func init() {
	provider.Register(ID, New)
	provider.CredentialHints[ID] = "provider.credentials.api-key"
}

// Timeouts are Gemini's default time limits: a thinking model sends its
// first streamed chunk only once it has thought, which can take minutes,
// so the first-byte limit of a streamed request is 3 minutes.
func Timeouts(stream bool) provider.Timeouts {
	t := provider.DefaultTimeouts(stream)
	if stream {
		t.FirstByte = 3 * time.Minute
	}
	return t
}

// Client is a Gemini client for one cartridge.
type Client struct {
	cfg     provider.Config
	model   string
	service string
	// base is the URL up to the model, e.g. https://host/v1beta/models/gemini-2.0-flash;
	// for Vertex with Application Default Credentials from the metadata
	// server the project is filled in at the first call (under mu).
	mu      sync.Mutex
	base    string
	version string
	region  string
	address string
	apiKey  string
	auth    *auth
	http    *http.Client
	// hint is what to check on 401/403 (and on an invalid API key, which
	// Google answers with 400).
	hint string
	// effort is provider.options.reasoning-effort, sent as
	// generationConfig.thinkingConfig.thinkingBudget unless set.
	effort provider.Effort
}

// New builds a client from the cartridge's provider section. It checks the
// credentials (service, the mutually exclusive api-key, file-path and
// file-contents, region) and reads a service-account key, but fetches no
// token until the first call.
func New(cfg provider.Config) (provider.Provider, error) {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = provider.ClientFor(cfg.Getenv)
	}
	model := cfg.Option("model")
	if model == "" {
		// Accepted from settings too, where other providers keep it.
		if m, ok := cfg.Settings["model"].(string); ok {
			model = strings.TrimSpace(m)
		}
	}
	if model == "" {
		return nil, fmt.Errorf("%s: provider.options.model is not set (for example gemini-2.5-flash)", ID)
	}
	model = strings.TrimPrefix(model, "models/")
	effort, err := cfg.ReasoningEffort()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, model: model, address: cfg.Credential("address"), effort: effort}
	c.http = wrapClient(cfg.HTTPClient)

	var given []string
	for _, k := range []string{"api-key", "file-path", "file-contents"} {
		if cfg.Credential(k) != "" {
			given = append(given, k)
		}
	}
	if len(given) > 1 {
		return nil, fmt.Errorf("%s: provider.credentials.%s are mutually exclusive: keep only one of api-key, file-path and file-contents", ID, strings.Join(given, ", provider.credentials."))
	}
	c.service = cfg.Credential("service")
	switch c.service {
	case "":
		return nil, &provider.MissingCredentialError{Provider: ID, Key: "service"}
	case ServiceGenerativeLanguage:
		err = c.generativeLanguage()
	case ServiceVertex:
		err = c.vertex()
	default:
		err = fmt.Errorf("%s: provider.credentials.service is %q; expected %s or %s", ID, c.service, ServiceGenerativeLanguage, ServiceVertex)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Client) generativeLanguage() error {
	key, err := c.cfg.Require("api-key")
	if err != nil {
		for _, k := range []string{"file-path", "file-contents"} {
			if c.cfg.Credential(k) != "" {
				return fmt.Errorf("%s: provider.credentials.%s is for service %s; service %s needs provider.credentials.api-key", ID, k, ServiceVertex, ServiceGenerativeLanguage)
			}
		}
		return err
	}
	c.apiKey = key
	c.hint = "check provider.credentials.api-key"
	c.version = c.cfg.Option("api-version")
	if c.version == "" {
		c.version = GenerativeLanguageVersion
	}
	address := c.address
	if address == "" {
		address = GenerativeLanguageAddress
	}
	c.base = provider.JoinURL(address, "/"+c.version+"/models/"+url.PathEscape(c.model))
	return nil
}

func (c *Client) vertex() error {
	c.version = c.cfg.Option("api-version")
	if c.version == "" {
		c.version = VertexVersion
	}
	if key := c.cfg.Credential("api-key"); key != "" {
		// Vertex AI express mode: an API key, no project or region.
		c.apiKey = key
		c.hint = "check provider.credentials.api-key"
		address := c.address
		if address == "" {
			address = "https://aiplatform.googleapis.com"
		}
		c.base = provider.JoinURL(address, "/"+c.version+"/publishers/google/models/"+url.PathEscape(c.model))
		return nil
	}
	region, err := c.cfg.Require("region")
	if err != nil {
		return err
	}
	c.region = region
	a, err := newAuth(c.cfg, c.cfg.HTTPClient)
	if err != nil {
		return err
	}
	c.auth = a
	c.hint = "check " + a.origin
	if p := c.cfg.Credential("project-id"); p != "" {
		a.project = p
	} else if a.project == "" && a.metadata == nil {
		return fmt.Errorf("%s: no project: set provider.credentials.project-id (the credentials in %s name none)", ID, strings.TrimPrefix(a.origin, "provider.credentials."))
	}
	if a.project != "" {
		c.base = c.vertexBase(a.project)
	}
	return nil
}

func (c *Client) vertexBase(project string) string {
	address := c.address
	if address == "" {
		if c.region == "global" {
			address = "https://aiplatform.googleapis.com"
		} else {
			address = "https://" + c.region + "-aiplatform.googleapis.com"
		}
	}
	return provider.JoinURL(address, "/"+c.version+"/projects/"+url.PathEscape(project)+"/locations/"+url.PathEscape(c.region)+"/publishers/google/models/"+url.PathEscape(c.model))
}

// ID implements provider.Provider.
func (c *Client) ID() string { return ID }

// endpoint returns the URL a request goes to: :streamGenerateContent?alt=sse
// when streaming, :generateContent otherwise.
func (c *Client) endpoint(ctx context.Context, stream bool) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.base == "" {
		project, err := c.auth.projectID(ctx)
		if err != nil {
			return "", fmt.Errorf("%s: no project: set provider.credentials.project-id (%v)", ID, err)
		}
		if project == "" {
			return "", fmt.Errorf("%s: no project: set provider.credentials.project-id", ID)
		}
		c.base = c.vertexBase(project)
	}
	if stream {
		return c.base + ":streamGenerateContent?alt=sse", nil
	}
	return c.base + ":generateContent", nil
}

// Complete implements provider.Provider.
func (c *Client) Complete(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (*provider.Response, error) {
	headers := map[string]string{}
	if c.apiKey != "" {
		headers["x-goog-api-key"] = c.apiKey
	}
	endpoint, err := c.endpoint(ctx, req.Stream)
	if err != nil {
		return nil, err
	}
	if c.auth != nil {
		tok, err := c.auth.token(ctx)
		if err != nil {
			return nil, err
		}
		headers["Authorization"] = tok.Type() + " " + tok.AccessToken
	}
	payload, err := c.Body(req)
	if err != nil {
		return nil, err
	}
	var captured []byte
	ctx = context.WithValue(ctx, errorBodyKey{}, &captured)
	body, _, err := provider.Send(ctx, provider.HTTPRequest{Provider: ID, Client: c.http, URL: endpoint, Headers: headers, Body: payload, Stream: req.Stream,
		Timeouts: c.cfg.Timeouts.Or(Timeouts(req.Stream))})
	if err != nil {
		return nil, c.explain(err, captured)
	}
	defer body.Close()
	if !req.Stream {
		d := newDecoder(nil)
		data, err := io.ReadAll(io.LimitReader(body, 64<<20))
		if err != nil {
			return nil, provider.ReadError(ctx, ID, err, false)
		}
		return d.whole(data)
	}
	return newDecoder(onEvent).stream(ctx, body)
}

// explain adds what to check to an error answer: Google reports an
// invalid API key as 400 INVALID_ARGUMENT with reason API_KEY_INVALID.
func (c *Client) explain(err error, body []byte) error {
	var pe *provider.Error
	if !errors.As(err, &pe) {
		return err
	}
	// Google's code is the numeric status; its status name says more.
	var v struct {
		Error struct {
			Status string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil && v.Error.Status != "" {
		pe.Code = v.Error.Status
	}
	switch {
	case pe.Status == http.StatusUnauthorized, pe.Status == http.StatusForbidden:
		pe.Hint = c.hint
	case pe.Status == http.StatusBadRequest && bytes.Contains(body, []byte("API_KEY_INVALID")):
		pe.Hint = c.hint
	}
	return pe
}

// errorBodyKey marks the context value where the transport leaves the
// body of an error answer.
type errorBodyKey struct{}

// errorTransport copies the body of error answers (for the hint above)
// and turns Google's RetryInfo detail into a Retry-After header, which the
// common error reader understands.
type errorTransport struct{ base http.RoundTripper }

func wrapClient(c *http.Client) *http.Client {
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	w := *c
	w.Transport = errorTransport{base: base}
	return &w
}

func (t errorTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if rerr != nil {
		return resp, nil
	}
	if p, ok := req.Context().Value(errorBodyKey{}).(*[]byte); ok {
		*p = data
	}
	if resp.Header.Get("Retry-After") == "" {
		if d := retryDelay(data); d > 0 {
			resp.Header.Set("Retry-After", fmt.Sprint(d.Seconds()))
		}
	}
	return resp, nil
}

// retryDelay reads google.rpc.RetryInfo's retryDelay ("33s") from an error body.
func retryDelay(body []byte) time.Duration {
	var v struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) != nil || len(arr) == 0 || json.Unmarshal(arr[0], &v) != nil {
			return 0
		}
	}
	for _, d := range v.Error.Details {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") && d.RetryDelay != "" {
			if dur, err := time.ParseDuration(d.RetryDelay); err == nil && dur > 0 {
				return dur
			}
		}
	}
	return 0
}
