package openai_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

func responsesClient(t *testing.T, brain providertest.Brain, options map[string]any) (provider.Provider, *openaitest.Responses) {
	t.Helper()
	fake := openaitest.NewResponses(brain)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	opts := map[string]any{"api": "responses"}
	for k, v := range options {
		opts[k] = v
	}
	p, err := provider.New(provider.Config{ID: "openai", Credentials: map[string]any{"address": srv.URL, "access-token": "k"},
		Options: opts, Settings: map[string]any{"model": "o4-mini"}, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

// TestResponsesToolLoop runs two tool rounds of a reasoning model over the
// Responses API, streamed and not: the reasoning items come back with
// their encrypted content on the next request (the fake refuses them
// otherwise), function_call_output answers each call, usage keeps the
// reasoning tokens apart.
func TestResponsesToolLoop(t *testing.T) {
	for _, stream := range []bool{true, false} {
		brain := providertest.Scripted(
			providertest.Reply{Reasoning: "I should look at the file first.", Calls: []providertest.Call{{Name: "read_file", Arguments: `{"path":"a.go"}`}}},
			providertest.Reply{Reasoning: "Now the other one.", Calls: []providertest.Call{{Name: "read_file", Arguments: `{"path":"b.go"}`}, {Name: "grep", Arguments: `{"pattern":"x"}`}}},
			providertest.Reply{Chunks: []string{"Both ", "files ", "read."}},
		)
		p, fake := responsesClient(t, brain, map[string]any{"reasoning-effort": "high"})
		req := provider.Request{System: "Be brief.", Stream: stream, Messages: []provider.Message{{Role: provider.RoleUser, Content: "Read the files."}},
			Tools: []tool.Spec{{Name: "read_file", Parameters: map[string]any{"type": "object"}}, {Name: "grep", Parameters: map[string]any{"type": "object"}}}}
		var text, reasoning strings.Builder
		var started []string
		onEvent := func(ev provider.Event) {
			switch ev.Kind {
			case provider.TextDelta:
				text.WriteString(ev.Text)
			case provider.ReasoningDelta:
				reasoning.WriteString(ev.Text)
			case provider.ToolCallStarted:
				started = append(started, ev.Text)
			}
		}
		var last *provider.Response
		for round := 1; ; round++ {
			resp, err := p.Complete(context.Background(), req, onEvent)
			if err != nil {
				t.Fatalf("stream %v round %d: %v", stream, round, err)
			}
			last = resp
			if len(resp.ToolCalls) == 0 {
				break
			}
			if resp.FinishReason != provider.FinishToolCalls || resp.Usage.ReasoningTokens == 0 {
				t.Errorf("round %d: finish %q usage %+v", round, resp.FinishReason, resp.Usage)
			}
			req.Messages = append(req.Messages, resp.Message())
			for _, c := range resp.ToolCalls {
				req.Messages = append(req.Messages, provider.Message{Role: provider.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: "contents of " + c.Arguments})
			}
		}
		if last.Text != "Both files read." || last.FinishReason != provider.FinishStop {
			t.Errorf("stream %v: answer %q finish %q", stream, last.Text, last.FinishReason)
		}
		if stream && (text.String() != "Both files read." || reasoning.String() != "I should look at the file first.Now the other one." || strings.Join(started, ",") != "read_file,read_file,grep") {
			t.Errorf("events: text %q reasoning %q tools %q", text.String(), reasoning.String(), started)
		}
		body := fake.Recorder.Last()
		if body["instructions"] != "Be brief." || body["store"] != false || body["reasoning"].(map[string]any)["effort"] != "high" {
			t.Errorf("body: instructions %v store %v reasoning %v", body["instructions"], body["store"], body["reasoning"])
		}
		input := body["input"].([]any)
		var types []string
		for _, it := range input {
			m := it.(map[string]any)
			typ, _ := m["type"].(string)
			if typ == "" {
				typ = m["role"].(string)
			}
			types = append(types, typ)
		}
		if got := strings.Join(types, " "); got != "user reasoning function_call function_call_output reasoning function_call function_call function_call_output function_call_output" {
			t.Errorf("input items: %s", got)
		}
	}
}

// TestResponsesStored continues a stored conversation with
// previous_response_id, sending only the new items.
func TestResponsesStored(t *testing.T) {
	p, fake := responsesClient(t, providertest.Echo, map[string]any{"store": true})
	req := provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "one"}}}
	resp, err := p.Complete(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Messages = append(req.Messages, resp.Message(), provider.Message{Role: provider.RoleUser, Content: "two"})
	resp, err = p.Complete(context.Background(), req, nil)
	if err != nil || resp.Text != "echo: two" {
		t.Fatalf("%+v %v", resp, err)
	}
	body := fake.Recorder.Last()
	if body["previous_response_id"] != "resp_fake1" || len(body["input"].([]any)) != 1 || body["store"] != true {
		t.Errorf("continuation: %v", body)
	}
}

// TestResponsesErrors: an error event mid-stream and a refused
// continuation are reported with the API's message.
func TestResponsesErrors(t *testing.T) {
	p, _ := responsesClient(t, providertest.Scripted(providertest.Reply{Chunks: []string{"par"}, StreamError: "The server had an error while processing your request."}), nil)
	_, err := p.Complete(context.Background(), provider.Request{Stream: true, Messages: []provider.Message{{Role: provider.RoleUser, Content: "x"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "The server had an error") {
		t.Errorf("stream error: %v", err)
	}
	p, _ = responsesClient(t, providertest.Echo, map[string]any{"store": true})
	msgs := []provider.Message{{Role: provider.RoleUser, Content: "x"}, {Role: provider.RoleAssistant, Content: "y", Extra: map[string]any{"openai-responses": map[string]any{"id": "resp_gone", "stored": true}}}, {Role: provider.RoleUser, Content: "z"}}
	_, err = p.Complete(context.Background(), provider.Request{Messages: msgs}, nil)
	if err == nil || !strings.Contains(err.Error(), "Previous response with id 'resp_gone' not found") {
		t.Errorf("lost continuation: %v", err)
	}
}
