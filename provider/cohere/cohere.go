// Package cohere speaks Cohere's chat API in both of its versions, with
// streaming and tool use:
//
//   - v2 (POST /v2/chat, https://docs.cohere.com/reference/chat): messages
//     with system, user, assistant and tool roles, OpenAI-like tool calls,
//     server-sent events (message-start, content-delta, tool-plan-delta,
//     tool-call-start/delta/end, message-end).
//   - v1 (POST /v1/chat, https://docs.cohere.com/v1/reference/chat), the API
//     the specification's settings describe: message, chat_history with
//     USER/CHATBOT/TOOL roles, preamble, connectors, tools with
//     parameter_definitions and tool_results, newline-delimited JSON events
//     (stream-start, text-generation, tool-calls-chunk,
//     tool-calls-generation, stream-end).
//
// options.api (v1 or v2) chooses; without it an address ending in /v1 or
// /v2 decides, and otherwise settings only v1 knows (connectors,
// prompt_truncation, search_queries_only, citation_quality,
// max_input_tokens, force_single_step, preamble, or documents in the v1
// shape) select v1, so the specification's cartridges run as written, and
// anything else gets v2, the current API.
package cohere

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nbots/nb/provider"
)

// ID is the cartridge's provider id.
const ID = "cohere"

// DefaultAddress is used when the cartridge gives no credentials.address.
const DefaultAddress = "https://api.cohere.com"

// The API versions options.api selects.
const (
	V1 = "v1"
	V2 = "v2"
)

// V1Settings are the settings only the v1 chat API knows; any of them in
// a cartridge without options.api selects v1.
var V1Settings = []string{"connectors", "prompt_truncation", "search_queries_only", "citation_quality",
	"max_input_tokens", "force_single_step", "preamble", "preamble_override", "conversation_id", "raw_prompting", "return_prompt"}

func init() {
	provider.Register(ID, New)
	provider.CredentialHints[ID] = "provider.credentials.api-key"
}

// Client is a Cohere chat client.
type Client struct {
	cfg     provider.Config
	api     string
	url     string
	headers map[string]string
}

// New builds a client. The api-key is required for the official address
// only: a private deployment behind credentials.address may need none.
func New(cfg provider.Config) (provider.Provider, error) {
	if err := cfg.RefuseEffort(); err != nil {
		return nil, err
	}
	address, key, err := cfg.Endpoint(ID, DefaultAddress, "api-key")
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(strings.TrimRight(address, "/"), "/chat")
	fromAddress := ""
	for _, v := range []string{V1, V2} {
		if strings.HasSuffix(base, "/"+v) {
			fromAddress = v
			base = strings.TrimSuffix(base, "/"+v)
		}
	}
	api := strings.ToLower(cfg.Option("api", "version"))
	switch {
	case api == V1 || api == V2:
	case api != "":
		return nil, fmt.Errorf("%s: provider.options.api is %q; use %q or %q", ID, api, V1, V2)
	case fromAddress != "":
		api = fromAddress
	default:
		api = Detect(cfg.Settings)
	}
	c := &Client{cfg: cfg, api: api, url: base + "/" + api + "/chat", headers: map[string]string{}}
	if key != "" {
		c.headers["Authorization"] = "Bearer " + key
	}
	if name := cfg.Option("client-name"); name != "" {
		c.headers["X-Client-Name"] = name
	}
	return c, nil
}

// Detect chooses the API for settings without options.api: V1 when they
// hold a setting only v1 knows or documents in v1's {title, text} shape,
// V2 otherwise.
func Detect(settings map[string]any) string {
	for _, k := range V1Settings {
		if v, ok := settings[k]; ok && v != nil {
			return V1
		}
	}
	if docs, ok := settings["documents"].([]any); ok {
		for _, d := range docs {
			if m, ok := d.(map[string]any); ok {
				if _, wrapped := m["data"]; !wrapped {
					return V1
				}
			}
		}
	}
	return V2
}

// ID implements provider.Provider.
func (c *Client) ID() string { return ID }

// API returns the API version the client speaks: V1 or V2.
func (c *Client) API() string { return c.api }

// URL returns the endpoint the client posts to.
func (c *Client) URL() string { return c.url }

// Body builds the request body for the client's API version. Images fail
// on v1, which takes none, with a *provider.UnsupportedError.
func (c *Client) Body(req provider.Request) (body map[string]any, err error) {
	if c.api == V1 {
		body, err = c.bodyV1(req)
	} else {
		body, err = c.bodyV2(req)
	}
	if err != nil {
		return nil, err
	}
	if err := req.Override.Apply(body, ID, samplingNames); err != nil {
		return nil, err
	}
	return body, nil
}

// samplingNames are Cohere's names of the sampling settings, the same on
// v1 and v2.
var samplingNames = provider.SamplingNames{Temperature: "temperature", TopP: "p", TopK: "k", MaxTokens: "max_tokens", Seed: "seed", PresencePenalty: "presence_penalty", FrequencyPenalty: "frequency_penalty"}

// Complete implements provider.Provider.
func (c *Client) Complete(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (*provider.Response, error) {
	payload, err := c.Body(req)
	if err != nil {
		return nil, err
	}
	body, _, err := provider.Send(ctx, provider.HTTPRequest{Provider: ID, Client: c.cfg.HTTPClient, URL: c.url, Headers: c.headers, Body: payload, Stream: req.Stream, Timeouts: c.cfg.Timeouts})
	if err != nil {
		return nil, err
	}
	defer body.Close()
	if onEvent == nil || !req.Stream {
		onEvent = func(provider.Event) {}
	}
	if c.api == V1 {
		if req.Stream {
			return decodeStreamV1(ctx, body, onEvent)
		}
		return decodeWholeV1(ctx, body)
	}
	if req.Stream {
		return decodeStreamV2(ctx, body, onEvent)
	}
	return decodeWholeV2(ctx, body)
}

// usage is the usage object of both versions.
type usage struct {
	BilledUnits *struct {
		InputTokens  float64 `json:"input_tokens"`
		OutputTokens float64 `json:"output_tokens"`
	} `json:"billed_units"`
	Tokens *struct {
		InputTokens  float64 `json:"input_tokens"`
		OutputTokens float64 `json:"output_tokens"`
	} `json:"tokens"`
}

func (u *usage) common() provider.Usage {
	switch {
	case u == nil:
		return provider.Usage{}
	case u.Tokens != nil:
		return provider.Usage{InputTokens: int(u.Tokens.InputTokens), OutputTokens: int(u.Tokens.OutputTokens)}
	case u.BilledUnits != nil:
		return provider.Usage{InputTokens: int(u.BilledUnits.InputTokens), OutputTokens: int(u.BilledUnits.OutputTokens)}
	}
	return provider.Usage{}
}

// errorText reads an error field that may be a string or an object.
func errorText(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" || s == `""` {
		return ""
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	if msg, _ := provider.ParseErrorBody(append(append([]byte(`{"error":`), raw...), '}')); msg != "" {
		return msg
	}
	return s
}

// arguments parses a call's JSON arguments into an object.
func arguments(s string) map[string]any {
	var v map[string]any
	if json.Unmarshal([]byte(s), &v) == nil && v != nil {
		return v
	}
	return map[string]any{}
}
