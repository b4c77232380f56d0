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
	"strings"

	"github.com/nbots/nb/provider"
)

// ID is the cartridge's provider id.
const ID = "openai"

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
	api := cfg.Option("api")
	switch api {
	case "":
		if official && ResponsesByDefault(cfg.Settings) {
			return newResponses(cfg, address, headers, effort)
		}
	case "chat":
	case "responses":
		return newResponses(cfg, address, headers, effort)
	default:
		return nil, fmt.Errorf("%s: provider.options.api: %q is not an API nb speaks (chat or responses)", ID, api)
	}
	return &Client{cfg: cfg, url: provider.JoinURL(address, "/v1/chat/completions"), headers: headers, official: official, effort: effort}, nil
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
