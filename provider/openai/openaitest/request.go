package openaitest

import (
	"encoding/json"

	"github.com/nbots/nb/provider/providertest"
)

// Request is a Chat Completions request body as the fakes of
// OpenAI-compatible APIs (Mistral, Maritaca, Cohere v2) read it.
type Request struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	Messages []Message `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
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
		Text string `json:"text"`
	}
	json.Unmarshal(m.Content, &parts) //nolint:errcheck // best effort
	for _, p := range parts {
		s += p.Text
	}
	return s
}

// ParseRequest reads a Chat Completions request body.
func ParseRequest(body []byte) (*Request, error) {
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// Turn converts the request to a Turn; a tool message is given the name
// of the earlier call it answers. check, when not nil, is called on each
// message first, with the names of the calls made before it by id, and
// can refuse the request as the API would.
func (r *Request) Turn(check func(i int, m *Message, calls map[string]string) error) (providertest.Turn, error) {
	t := providertest.Turn{Model: r.Model, Stream: r.Stream}
	names := map[string]string{}
	for i := range r.Messages {
		m := &r.Messages[i]
		if check != nil {
			if err := check(i, m, names); err != nil {
				return t, err
			}
		}
		msg := providertest.Msg{Role: m.Role, Content: m.Text(), ToolCallID: m.ToolCallID}
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
