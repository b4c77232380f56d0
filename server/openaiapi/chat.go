package openaiapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// chatRequest is the body of POST /v1/chat/completions: the fields nb
// reads. Others are accepted and ignored (see docs/openai.md).
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools     toolList[chatTool] `json:"tools"`
	Functions json.RawMessage    `json:"functions"`
	User      string             `json:"user"`
	N         *int               `json:"n"`
	sampling
}

// sampling are the client's sampling settings.
type sampling struct {
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	MaxOutputTokens     *int            `json:"max_output_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Seed                *int64          `json:"seed"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
}

type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ToolCalls        []chatToolCall  `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	FunctionCall     json.RawMessage `json:"function_call"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
	} `json:"function"`
}

// contentPart is one part of a message's content (chat completions'
// parts and the Responses API's share this shape).
type contentPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Refusal  string          `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"`
}

// settings turns the client's sampling settings into the exchange's
// override of the provider's (its typed sampling view) and its stop
// sequences, checking their ranges as OpenAI does; nil when there are
// none.
func (s *sampling) settings() (*provider.Override, []string, error) {
	out := &provider.Sampling{Temperature: s.Temperature, TopP: s.TopP, TopK: s.TopK, Seed: s.Seed,
		PresencePenalty: s.PresencePenalty, FrequencyPenalty: s.FrequencyPenalty}
	for _, limit := range []struct {
		name string
		v    *int
	}{{"max_tokens", s.MaxTokens}, {"max_completion_tokens", s.MaxCompletionTokens}, {"max_output_tokens", s.MaxOutputTokens}} {
		if limit.v != nil {
			if *limit.v < 1 {
				return nil, nil, badRequest(limit.name, "%s must be at least 1", limit.name)
			}
			out.MaxTokens = limit.v
		}
	}
	ranges := []struct {
		name     string
		v        *float64
		min, max float64
	}{{"temperature", s.Temperature, 0, 2}, {"top_p", s.TopP, 0, 1}, {"presence_penalty", s.PresencePenalty, -2, 2}, {"frequency_penalty", s.FrequencyPenalty, -2, 2}}
	for _, r := range ranges {
		if r.v != nil && (*r.v < r.min || *r.v > r.max) {
			return nil, nil, badRequest(r.name, "%s must be between %g and %g", r.name, r.min, r.max)
		}
	}
	if s.TopK != nil && *s.TopK < 1 {
		return nil, nil, badRequest("top_k", "top_k must be at least 1")
	}
	var stops []string
	if stop := bytes.TrimSpace(s.Stop); len(stop) > 0 && string(stop) != "null" {
		var one string
		if err := json.Unmarshal(stop, &one); err == nil {
			stops = []string{one}
		} else if err := json.Unmarshal(stop, &stops); err != nil {
			return nil, nil, badRequest("stop", "stop must be a string or an array of strings")
		}
		if len(stops) > 4 {
			return nil, nil, badRequest("stop", "stop takes at most 4 sequences")
		}
	}
	if out.IsZero() {
		return nil, stops, nil
	}
	return &provider.Override{Sampling: *out}, stops, nil
}

// decode reads a JSON request body into v: a body that is too large, not
// JSON, or of the wrong shape is the client's error.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) error {
	var body []byte
	if whole, ok := r.Body.(interface{ Bytes() []byte }); ok && int64(len(whole.Bytes())) <= h.maxBody {
		// The server read it already (nb serve): no second copy.
		body = whole.Bytes()
	} else {
		var err error
		if body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody)); err != nil {
			return err
		}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "the request has no body: send a JSON object")
	}
	// In one pass; a body refused is decoded again by encoding/json,
	// whose errors the messages below are made of.
	if err := provider.DecodeJSON(body, v); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		var te *json.UnmarshalTypeError
		if ok := asTypeError(err, &te); ok && te.Field != "" {
			// Fields of embedded structs (sampling) are the request's own.
			field := strings.TrimPrefix(te.Field, "sampling.")
			return badRequest(field, "invalid value for %s: expected %s, got JSON %s", field, jsonKind(te.Type), te.Value)
		}
		if ok := asTypeError(err, &te); ok {
			return badRequest("", "the request body must be a JSON object, not %s", te.Value)
		}
		return badRequest("", "the request body is not valid JSON: %v", err)
	}
	return nil
}

func asTypeError(err error, te **json.UnmarshalTypeError) bool {
	e, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*te = e
	}
	return ok
}

// open admits r (see admitRequest) and decodes its JSON body into req.
// When it returns false it has answered the client and released what it
// took; otherwise the caller calls done when the request ends.
func (h *Handler) open(w http.ResponseWriter, r *http.Request, req any) (_ *http.Request, done func(), ok bool) {
	r, done, err := h.admitRequest(r)
	if err != nil {
		WriteError(w, apiError(err, "", ""))
		return r, nil, false
	}
	if err := h.decode(w, r, req); err != nil {
		WriteError(w, apiError(err, "", ""))
		done()
		return r, nil, false
	}
	return r, done, true
}

// chatCompletions answers POST /v1/chat/completions.
func (h *Handler) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	r, done, ok := h.open(w, r, &req)
	if !ok {
		return
	}
	defer done()
	t, err := h.chatTurn(r, &req)
	if err != nil {
		WriteError(w, apiError(err, req.Model, ""))
		return
	}
	h.reportLost(w, r, t)
	id := "chatcmpl-" + newID()
	created := h.now().Unix()
	if req.Stream {
		h.streamChat(w, r, t, id, created, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	out, err := h.run(r.Context(), t, nil)
	if err != nil {
		h.fail(w, r, t, err)
		return
	}
	writeBody(w, http.StatusOK, chatCompletion(id, created, t.model, out))
}

// fail answers a failed exchange, unless the client has gone.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, t *turn, err error) {
	if errors.Is(r.Context().Err(), context.Canceled) {
		return
	}
	e := apiError(err, t.model, t.bot.Provider().ID())
	if e.Status >= 500 || e.Type == "upstream_error" {
		h.logger(r.Context()).Error("exchange failed", "model", t.model, "status", e.Status, "error", err)
	}
	WriteError(w, e)
}

// chatTurn checks the request and turns it into an exchange.
func (h *Handler) chatTurn(r *http.Request, req *chatRequest) (*turn, error) {
	if req.Model == "" {
		return nil, badRequest("model", "model is required: the id of a cartridge (GET /v1/models lists them)")
	}
	if req.N != nil && *req.N != 1 {
		return nil, badRequest("n", "n must be 1: nb answers with one choice")
	}
	if len(req.Functions) > 0 && string(req.Functions) != "null" {
		return nil, badRequest("functions", "functions (deprecated) is not supported: send tools")
	}
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "messages must hold at least one message")
	}
	b, err := h.catalog.Bot(r.Context(), cartridgeID(req.Model))
	if err != nil {
		return nil, err
	}
	t := &turn{bot: b, model: req.Model, endUser: h.userOf(r, req.User), owner: h.ownerOf(r), whole: !req.Stream}
	if t.external, err = chatTools(r.Context(), b, req.Tools); err != nil {
		return nil, err
	}
	if t.override, t.stop, err = req.settings(); err != nil {
		return nil, err
	}
	var system []string
	var events []state.Event
	names := map[string]string{} // call id -> tool name
	for i, m := range req.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			text, _, err := messageContent(m.Content, param+".content", false)
			if err != nil {
				return nil, err
			}
			system = append(system, text)
		case "user":
			text, images, err := messageContent(m.Content, param+".content", true)
			if err != nil {
				return nil, err
			}
			events = appendUser(events, text, images)
		case "assistant":
			if len(m.FunctionCall) > 0 && string(m.FunctionCall) != "null" {
				return nil, badRequest(param+".function_call", "function_call (deprecated) is not supported: send tool_calls")
			}
			text, _, err := messageContent(m.Content, param+".content", false)
			if err != nil {
				return nil, err
			}
			calls := make([]clientCall, 0, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				if c.ID == "" || c.Function.Name == "" {
					return nil, badRequest(fmt.Sprintf("%s.tool_calls[%d]", param, j), "a tool call needs an id and a function name")
				}
				args := c.Function.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				calls = append(calls, clientCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
				names[c.ID] = c.Function.Name
			}
			reasoning := ""
			if m.ReasoningContent != nil {
				reasoning = *m.ReasoningContent
			} else if m.Reasoning != nil {
				reasoning = *m.Reasoning
			}
			events = append(events, aiEvent(text, calls, reasoning))
		case "tool":
			if m.ToolCallID == "" {
				return nil, badRequest(param+".tool_call_id", "a tool message needs the tool_call_id it answers")
			}
			name, ok := names[m.ToolCallID]
			if !ok {
				return nil, badRequest(param+".tool_call_id", "no assistant message before this one has a tool call with id %q", m.ToolCallID)
			}
			text, _, err := messageContent(m.Content, param+".content", false)
			if err != nil {
				return nil, err
			}
			events = append(events, toolEvent(m.ToolCallID, name, text))
		case "function":
			return nil, badRequest(param+".role", "the function role (deprecated) is not supported: send tool messages")
		default:
			return nil, badRequest(param+".role", "unknown role %q: expected system, developer, user, assistant or tool", m.Role)
		}
	}
	t.system = strings.Join(system, "\n\n")
	if events, t.lost, err = h.restoreRounds(r.Context(), t.owner, events); err != nil {
		return nil, err
	}
	t.history, t.input = splitInput(events)
	if t.input == nil && len(t.history) == 0 {
		return nil, badRequest("messages", "messages hold only system text: send a user message")
	}
	return t, nil
}

// userOf is the end user of a request: the server's, with the client's
// user field after it.
func (h *Handler) userOf(r *http.Request, client string) string {
	if h.endUser == nil {
		return client
	}
	u := h.endUser(r)
	if client != "" {
		u += "/" + client
	}
	return u
}

// splitInput takes the last user message off events: it is the new
// input. When the conversation ends otherwise (tool results), there is
// none and the exchange continues.
func splitInput(events []state.Event) ([]state.Event, *userInput) {
	if n := len(events); n > 0 && events[n-1].Who == state.RoleUser {
		last := events[n-1]
		return events[:n-1], &userInput{text: agentText(last.Message), images: last.Images}
	}
	return events, nil
}

func agentText(v any) string {
	s, _ := v.(string)
	return s
}

// appendUser adds a user message; one that follows another user message
// joins it (nb's history keeps one user turn between answers).
func appendUser(events []state.Event, text string, images []media.Image) []state.Event {
	if n := len(events); n > 0 && events[n-1].Who == state.RoleUser {
		last := &events[n-1]
		prev := agentText(last.Message)
		switch {
		case prev == "":
			prev = text
		case text != "":
			prev += "\n\n" + text
		}
		last.Message, last.Input = prev, &prev
		last.Images = append(last.Images, images...)
		return events
	}
	raw := text
	return append(events, state.Event{At: state.Now(), Who: state.RoleUser, Mode: "eval", Input: &raw, Message: text, Images: images})
}

func aiEvent(text string, calls []clientCall, reasoning string) state.Event {
	ev := state.Event{At: state.Now(), Who: state.RoleAI, Mode: "eval"}
	if text != "" || len(calls) == 0 {
		ev.Message = text
	}
	ev.ToolCalls, ev.Reasoning = calls, reasoning
	return ev
}

func toolEvent(id, name, output string) state.Event {
	return state.Event{At: state.Now(), Who: state.RoleTool, Mode: "eval", Message: output, Result: state.ToolResult{ID: id, Name: name}}
}

// chatTools turns the client's tools into specs offered beside the
// cartridge's.
func chatTools(ctx context.Context, b *bot.Bot, tools []chatTool) ([]tool.Spec, error) {
	c, err := newToolChecker(b, len(tools))
	if err != nil {
		return nil, err
	}
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return nil, badRequest(param+".type", "unsupported tool type %q: only function tools are supported", t.Type)
		}
		if err := c.add(ctx, param+".function.name", t.Function.Name, t.Function.Description, t.Function.Parameters); err != nil {
			return nil, err
		}
	}
	return c.specs, nil
}

// messageContent reads a message's content (param is its place in the
// request): a string, an array of parts, or null. Images are taken where images is set, else refused.
func messageContent(raw json.RawMessage, param string, images bool) (string, []media.Image, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, badRequest(param, "invalid content: %v", err)
		}
		return s, nil, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, badRequest(param, "content must be a string or an array of content parts")
	}
	var text strings.Builder
	var imgs []media.Image
	for j, p := range parts {
		pp := fmt.Sprintf("%s[%d]", param, j)
		switch p.Type {
		case "text", "input_text", "output_text":
			text.WriteString(p.Text)
		case "refusal":
			text.WriteString(p.Refusal)
		case "image_url", "input_image":
			if !images {
				return "", nil, badRequest(pp+".type", "images are only taken in user messages")
			}
			img, err := partImage(p.ImageURL, pp)
			if err != nil {
				return "", nil, err
			}
			imgs = append(imgs, img)
		default:
			return "", nil, badRequest(pp+".type", "unsupported content part type %q: nb takes text and images", p.Type)
		}
	}
	return text.String(), imgs, nil
}

// partImage reads an image part's URL: {"url": ...} in chat completions,
// a plain string in the Responses API.
func partImage(raw json.RawMessage, param string) (media.Image, error) {
	var u string
	if err := json.Unmarshal(raw, &u); err != nil {
		var obj struct {
			URL string `json:"url"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return media.Image{}, badRequest(param+".image_url", "image_url must be a URL or an object with a url")
		}
		u = obj.URL
	}
	return imageFromURL(u, param+".image_url")
}

// imageFromURL reads an image a client gives by URL: inline as a data:
// URL, or an https URL the provider fetches.
func imageFromURL(u, param string) (media.Image, error) {
	switch {
	case strings.HasPrefix(u, "data:"):
		img, err := media.ParseDataURL(u)
		if err != nil {
			return media.Image{}, badRequest(param, "invalid image: %v", err)
		}
		if !strings.HasPrefix(img.MediaType, "image/") {
			return media.Image{}, badRequest(param, "the data: URL holds %s, not an image", img.MediaType)
		}
		return img, nil
	case strings.HasPrefix(u, "https://"):
		return media.Image{URL: u}, nil
	case u == "":
		return media.Image{}, badRequest(param, "the image has no URL")
	}
	return media.Image{}, badRequest(param, "unsupported image URL %q: send a data: URL (base64) or an https URL", clip(u))
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// jsonKind names what a Go type decodes from, in JSON's words: a client
// sees "an array", never nb's own type names.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another JSON value"
}
