// Package mistral speaks Mistral AI's chat completion API
// (POST /v1/chat/completions), streamed over server-sent events, with
// function calling. API documentation: https://docs.mistral.ai/api/ and
// https://docs.mistral.ai/capabilities/function_calling/.
//
// The API looks like OpenAI's but differs where it matters here: tool call
// ids must be exactly nine letters or digits (ids written by another
// provider are mapped, the same way every time), tool messages carry the
// function name, reasoning models send content as a list of thinking and
// text chunks, and unknown body fields are refused with a 422.
package mistral

import (
	"context"
	"crypto/sha256"
	"math/big"
	"strings"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/openai"
)

// ID is the cartridge's provider id.
const ID = "mistral"

// DefaultAddress is used when the cartridge gives no credentials.address.
const DefaultAddress = "https://api.mistral.ai"

func init() {
	provider.Register(ID, New)
	provider.CredentialHints[ID] = "provider.credentials.api-key"
}

// Client is a Mistral chat completion client.
type Client struct {
	cfg     provider.Config
	url     string
	headers map[string]string
}

// New builds a client. The api-key is required for the official address
// only: a self-hosted deployment behind credentials.address may need none.
func New(cfg provider.Config) (provider.Provider, error) {
	if err := cfg.RefuseEffort(); err != nil {
		return nil, err
	}
	address, key, err := cfg.Endpoint(ID, DefaultAddress, "api-key")
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, url: provider.JoinURL(address, "/v1/chat/completions"), headers: map[string]string{}}
	if key != "" {
		c.headers["Authorization"] = "Bearer " + key
	}
	return c, nil
}

// ID implements provider.Provider.
func (c *Client) ID() string { return ID }

// dialect is where Mistral's API departs from OpenAI's.
var dialect = openai.Dialect{
	ID: ID,
	// An assistant message with tool calls has content "", never null.
	EmptyContent: openai.ContentEmpty,
	// A call without arguments is sent as {}: the API refuses "".
	FillArguments: true,
	// Tool call ids must be nine letters or digits.
	CallID: CallID,
	// Tool messages carry the function name.
	ToolName: true,
	// Calls stream whole, may all have index 0, and continuations may
	// carry the id "null".
	CallsByID: true,
	// Images are {type: image_url, image_url: "<url>"} chunks.
	Images: openai.ImageURLString,
	// The API refuses a user message right after a tool message, so the
	// images of a tool result are chunks of the tool message's content.
	ToolImages: openai.ToolImagesInToolMessage,
	// A forced call is OpenAI's named function
	// ({"type": "function", "function": {"name": n}}), which the API
	// documents beside "any" and "required".
	Forcing: openai.ForceFunction,
}

// Body builds the request body: the cartridge's settings verbatim
// (model, temperature, top_p, max_tokens, safe_prompt, random_seed,
// response_format, tool_choice ...), then messages, tools and the stream
// flag. tool_choice and parallel_tool_calls are left out without tools.
// There is no user field: the API refuses fields it does not know.
func (c *Client) Body(req provider.Request) (map[string]any, error) {
	body, err := dialect.Body(c.cfg.BodyFor(req), req, "tool_choice", "parallel_tool_calls")
	if err != nil {
		return nil, err
	}
	openai.StopAndFormat(body, req)
	if err := req.Override.Apply(body, ID, samplingNames); err != nil {
		return nil, err
	}
	return body, nil
}

// samplingNames are Mistral's names of the sampling settings.
var samplingNames = provider.SamplingNames{Temperature: "temperature", TopP: "top_p", MaxTokens: "max_tokens",
	Seed: "random_seed", PresencePenalty: "presence_penalty", FrequencyPenalty: "frequency_penalty"}

// Messages maps the common conversation to Mistral messages: the system
// text first, the backdrop as a user message, then the history, with
// tool call ids passed through CallID. Images are image_url chunks, in
// the user message or the tool message they came with.
func Messages(req provider.Request) ([]any, error) {
	return dialect.Messages(req)
}

const idAlphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// CallID returns id when it is already a Mistral tool call id (nine
// letters or digits) and otherwise a nine-character id derived from it,
// so a conversation begun with another provider can go on here and a call
// and its result still share an id.
func CallID(id string) string {
	if validID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	n := new(big.Int).SetBytes(sum[:])
	b := make([]byte, 9)
	base := big.NewInt(int64(len(idAlphabet)))
	mod := new(big.Int)
	for i := range b {
		n.DivMod(n, base, mod)
		b[i] = idAlphabet[mod.Int64()]
	}
	return string(b)
}

func validID(id string) bool {
	if len(id) != 9 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !strings.ContainsRune(idAlphabet, rune(id[i])) {
			return false
		}
	}
	return true
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
		return dialect.DecodeWhole(ctx, body)
	}
	return dialect.DecodeStream(ctx, body, onEvent)
}
