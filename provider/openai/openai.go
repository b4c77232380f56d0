// Package openai speaks the OpenAI Chat Completions API
// (POST /v1/chat/completions), streamed over server-sent events. It also
// serves every OpenAI-compatible server (vLLM, llama.cpp's server, LM Studio,
// OpenRouter, Groq) through credentials.address. It speaks the Responses
// API instead (responses.go) with provider.options.api: responses, and by
// default for OpenAI's reasoning models on OpenAI's own address
// (ResponsesByDefault).
package openai

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"strings"

	"github.com/nbots/nb/provider"
)

// ID is the cartridge's provider id.
const ID = "openai"

// AzureAPIVersion is the api-version an Azure OpenAI endpoint is sent
// unless provider.options.api-version says otherwise (nanobot's).
const AzureAPIVersion = "2024-10-21"

// DefaultAddress is used when the cartridge gives no credentials.address.
const DefaultAddress = "https://api.openai.com"

func init() {
	provider.Register(ID, New)
	provider.CredentialHints[ID] = "provider.credentials.access-token"
}

// Client is an OpenAI Chat Completions client.
type Client struct {
	cfg      provider.Config
	url      string
	headers  map[string]string
	official bool // the address is OpenAI's own
	// effort is provider.options.reasoning-effort, sent as
	// reasoning_effort unless the settings have it.
	effort provider.Effort
}

// New builds a client. The access token is required for the official
// address only: local compatible servers usually need none.
func New(cfg provider.Config) (provider.Provider, error) {
	address, token, err := cfg.Endpoint(ID, DefaultAddress, "access-token", "api-key")
	if err != nil {
		return nil, err
	}
	official := strings.TrimRight(address, "/") == DefaultAddress
	effort, err := cfg.ReasoningEffort()
	if err != nil {
		return nil, err
	}
	headers := map[string]string{}
	if token != "" {
		headers["Authorization"] = "Bearer " + token
	}
	if org := cfg.Credential("organization", "organization-id"); org != "" {
		headers["OpenAI-Organization"] = org
	}
	endpoint := cfg.Option("endpoint")
	switch endpoint {
	case "", "host", "base-url":
	case "azure":
		return newAzure(cfg, address, token, effort)
	default:
		return nil, fmt.Errorf("%s: provider.options.endpoint: %q is not one nb knows (host, the default, base-url or azure)", ID, endpoint)
	}
	// join puts an API path after the address: the host (with or without
	// /v1) by default, or the OpenAI SDK's base_url, which holds the
	// version already (https://open.bigmodel.cn/api/paas/v4).
	join := func(path string) string {
		if endpoint == "base-url" {
			return strings.TrimRight(address, "/") + strings.TrimPrefix(path, "/v1")
		}
		return provider.JoinURL(address, path)
	}
	if endpoint == "base-url" {
		official = strings.TrimRight(address, "/") == DefaultAddress+"/v1"
	}
	switch api := cfg.Option("api"); api {
	case "":
		if official && ResponsesByDefault(cfg.Settings) {
			return newResponses(cfg, join("/v1/responses"), headers, effort)
		}
	case "chat":
	case "responses":
		return newResponses(cfg, join("/v1/responses"), headers, effort)
	default:
		return nil, fmt.Errorf("%s: provider.options.api: %q is not an API nb speaks (chat or responses)", ID, api)
	}
	return &Client{cfg: cfg, url: join("/v1/chat/completions"), headers: headers, official: official, effort: effort}, nil
}

// newAzure is a client of an Azure OpenAI deployment: the address is the
// resource's endpoint (https://<resource>.openai.azure.com), the
// deployment is the settings' model, and the key goes in the api-key
// header. The body leaves the model out (the URL names the deployment).
func newAzure(cfg provider.Config, address, key string, effort provider.Effort) (*Client, error) {
	if cfg.Credential("address") == "" {
		return nil, fmt.Errorf("%s: provider.credentials.address: an Azure OpenAI endpoint needs the resource's address (https://<resource>.openai.azure.com)", ID)
	}
	if key == "" {
		return nil, &provider.MissingCredentialError{Provider: ID, Key: "api-key"}
	}
	if api := cfg.Option("api"); api != "" && api != "chat" {
		return nil, fmt.Errorf("%s: provider.options.api: %q: an Azure OpenAI endpoint is reached through chat completions only", ID, api)
	}
	deployment, _ := cfg.Settings["model"].(string)
	if deployment == "" {
		return nil, fmt.Errorf("%s: provider.settings.model: an Azure OpenAI endpoint needs the deployment's name", ID)
	}
	version := cfg.Option("api-version")
	if version == "" {
		version = AzureAPIVersion
	}
	settings := maps.Clone(cfg.Settings)
	delete(settings, "model")
	cfg.Settings = settings
	u := strings.TrimRight(address, "/") + "/openai/deployments/" + url.PathEscape(deployment) + "/chat/completions?api-version=" + url.QueryEscape(version)
	return &Client{cfg: cfg, url: u, headers: map[string]string{"api-key": key}, official: true, effort: effort}, nil
}

// ID implements provider.Provider.
func (c *Client) ID() string { return ID }

// official is OpenAI's own dialect of the API.
var official = Dialect{ID: ID}

// Body builds the request body: the cartridge's settings verbatim, then
// the conversation, tools, stream flag and user. A streamed request asks
// for the token usage (stream_options: {include_usage: true}) unless the
// settings have stream_options of their own, or stream_options: null for
// a compatible server that refuses the field; stream_options is left out
// when not streaming, as the API refuses it then.
func (c *Client) Body(req provider.Request) (map[string]any, error) {
	body, err := official.Body(c.cfg.BodyFor(req), req, "tool_choice", "parallel_tool_calls")
	if err != nil {
		return nil, err
	}
	StopAndFormat(body, req)
	if !req.Stream {
		delete(body, "stream_options")
	} else if _, set := c.cfg.Settings["stream_options"]; !set {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	if user := req.UserOr(c.cfg.User); user != "" {
		body["user"] = user
	}
	if err := req.Override.Apply(body, ID, SamplingNames(body, c.official)); err != nil {
		return nil, err
	}
	provider.ApplyEffort(body, c.effort, "reasoning_effort", false)
	return body, nil
}

// SamplingNames are the Chat Completions names of the sampling settings.
// The answer's limit goes where the cartridge's settings put theirs
// (max_tokens or max_completion_tokens); without one, OpenAI's own API
// takes max_completion_tokens (its reasoning models refuse max_tokens)
// and compatible servers max_tokens, the name they all know.
func SamplingNames(body map[string]any, official bool) provider.SamplingNames {
	limit := "max_tokens"
	if _, ok := body["max_completion_tokens"]; ok {
		limit = "max_completion_tokens"
	} else if _, ok := body["max_tokens"]; !ok && official {
		limit = "max_completion_tokens"
	}
	return provider.SamplingNames{Temperature: "temperature", TopP: "top_p", MaxTokens: limit, Seed: "seed",
		PresencePenalty: "presence_penalty", FrequencyPenalty: "frequency_penalty"}
}

// Messages maps the common conversation to Chat Completions messages:
// the system text first, then the backdrop as a user message, then the
// history. Images of user messages are image_url parts (a data: URL or
// the image's URL); tool messages take text only, so the images of a
// round's tool results follow its tool messages in one user message.
func Messages(req provider.Request) ([]any, error) {
	return official.Messages(req)
}

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
	if !req.Stream {
		return official.DecodeWhole(ctx, body)
	}
	return official.DecodeStream(ctx, body, onEvent)
}
