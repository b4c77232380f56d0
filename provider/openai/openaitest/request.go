package openaitest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// Request is a Chat Completions request body as the fakes of
// OpenAI-compatible APIs (Mistral, Maritaca, Cohere v2) read it.
type Request struct {
	Model         string          `json:"model"`
	Stream        bool            `json:"stream"`
	StreamOptions json.RawMessage `json:"stream_options"`
	Messages      []Message       `json:"messages"`
	Tools         []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// IncludeUsage reports whether a streamed request asked for the usage
// chunk (stream_options.include_usage).
func (r *Request) IncludeUsage() bool {
	var o struct {
		IncludeUsage bool `json:"include_usage"`
	}
	json.Unmarshal(r.StreamOptions, &o) //nolint:errcheck // absent: false
	return o.IncludeUsage
}

// Message is one entry of Request.Messages.
type Message struct {
	Role string `json:"role"`
	// Content is kept raw: a fake may check that it is there and a string.
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// Text is the message's content: a string, or the text of a list of
// {type: text, text} parts.
func (m *Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(m.Content, &parts) //nolint:errcheck // best effort
	for _, p := range parts {
		if p.Type == "text" || p.Type == "" {
			s += p.Text
		}
	}
	return s
}

// ImageRules say which image parts a fake accepts, as its API does.
type ImageRules struct {
	// StringURL accepts image_url as a plain string (Mistral) besides
	// OpenAI's {url} object.
	StringURL bool
	// InTool accepts image parts in tool messages (OpenAI and Cohere take
	// text only there).
	InTool bool
}

// Images decodes the image_url parts of the message's content, checking
// them as the API does: an {url} object (or a string when rules allow),
// the URL a base64 data: URL of an image type or an http(s) URL. Data
// URLs are decoded to their bytes.
func (m *Message) Images(i int, rules ImageRules) ([]media.Image, error) {
	var parts []struct {
		Type     string          `json:"type"`
		ImageURL json.RawMessage `json:"image_url"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return nil, nil // a string, or no content
	}
	var out []media.Image
	for j, p := range parts {
		switch p.Type {
		case "text":
			continue
		case "image_url":
		default:
			return nil, fmt.Errorf("Invalid value: '%s'. Supported values are: 'text' and 'image_url'. (messages[%d].content[%d].type)", p.Type, i, j)
		}
		if m.Role != "user" && !(m.Role == "tool" && rules.InTool) {
			return nil, fmt.Errorf("Image URLs are only allowed for messages with role 'user', but this message with role '%s' contains an image URL. (messages[%d].content[%d])", m.Role, i, j)
		}
		var u string
		var obj struct {
			URL    *string `json:"url"`
			Detail string  `json:"detail"`
		}
		switch {
		case json.Unmarshal(p.ImageURL, &obj) == nil && obj.URL != nil:
			u = *obj.URL
		case rules.StringURL && json.Unmarshal(p.ImageURL, &u) == nil:
		default:
			return nil, fmt.Errorf("Invalid type for 'messages[%d].content[%d].image_url': expected an object with a url, but got %s instead.", i, j, string(p.ImageURL))
		}
		img, err := parseImageURL(u)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content[%d].image_url: %v", i, j, err)
		}
		out = append(out, img)
	}
	return out, nil
}

func parseImageURL(u string) (media.Image, error) {
	switch {
	case strings.HasPrefix(u, "data:"):
		img, err := media.ParseDataURL(u)
		if err != nil {
			return media.Image{}, fmt.Errorf("Invalid base64 image_url: %v", err)
		}
		if !strings.HasPrefix(img.MediaType, "image/") {
			return media.Image{}, fmt.Errorf("Invalid MIME type %q. Only image types are supported.", img.MediaType)
		}
		return img, nil
	case strings.HasPrefix(u, "https://"), strings.HasPrefix(u, "http://"):
		return media.Image{URL: u}, nil
	}
	return media.Image{}, fmt.Errorf("Invalid image URL %q: expected a base64 data: URL or an http(s) URL.", provider.Clip(u))
}

// ParseRequest reads a Chat Completions request body.
func ParseRequest(body []byte) (*Request, error) {
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// Turn converts the request to a Turn under OpenAI's image rules; see
// TurnWith.
func (r *Request) Turn(check func(i int, m *Message, calls map[string]string) error) (providertest.Turn, error) {
	return r.TurnWith(ImageRules{}, check)
}

// TurnWith converts the request to a Turn; a tool message is given the
// name of the earlier call it answers, and image parts are decoded under
// rules. check, when not nil, is called on each message first, with the
// names of the calls made before it by id, and can refuse the request as
// the API would.
func (r *Request) TurnWith(rules ImageRules, check func(i int, m *Message, calls map[string]string) error) (providertest.Turn, error) {
	t := providertest.Turn{Model: r.Model, Stream: r.Stream}
	names := map[string]string{}
	for i := range r.Messages {
		m := &r.Messages[i]
		if check != nil {
			if err := check(i, m, names); err != nil {
				return t, err
			}
		}
		images, err := m.Images(i, rules)
		if err != nil {
			return t, err
		}
		msg := providertest.Msg{Role: m.Role, Content: m.Text(), ToolCallID: m.ToolCallID, Images: images}
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Function.Name
			msg.ToolCalls = append(msg.ToolCalls, c.Function.Name+"("+c.Function.Arguments+")")
		}
		if m.Role == "tool" {
			msg.ToolName = names[m.ToolCallID]
		}
		if m.Role == "system" && t.System == "" {
			t.System = msg.Content
		}
		t.Messages = append(t.Messages, msg)
	}
	for _, tl := range r.Tools {
		t.Tools = append(t.Tools, tl.Function.Name)
	}
	return t, nil
}

// CheckToolAnswers enforces OpenAI's rule that an assistant message with
// tool_calls is followed at once by tool messages answering each call.
func (r *Request) CheckToolAnswers() error {
	for i, m := range r.Messages {
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		want := map[string]bool{}
		for _, c := range m.ToolCalls {
			want[c.ID] = true
		}
		for j := i + 1; j < len(r.Messages) && r.Messages[j].Role == "tool"; j++ {
			delete(want, r.Messages[j].ToolCallID)
		}
		for id := range want {
			return fmt.Errorf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", id)
		}
	}
	return nil
}
