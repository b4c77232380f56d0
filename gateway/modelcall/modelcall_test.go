package modelcall

import (
	"context"
	"errors"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

type fakeProvider struct {
	got  provider.Request
	resp *provider.Response
	err  error
}

func (f *fakeProvider) ID() string { return "fake" }

func (f *fakeProvider) Complete(_ context.Context, req provider.Request, _ func(provider.Event)) (*provider.Response, error) {
	f.got = req
	return f.resp, f.err
}

func TestProvider(t *testing.T) {
	p := &fakeProvider{resp: &provider.Response{Text: "t", ToolCalls: []provider.ToolCall{{ID: "1", Name: "save_memory", Arguments: `{"a":1}`}}, FinishReason: provider.FinishToolCalls, Usage: provider.Usage{InputTokens: 7, OutputTokens: 3}}}
	spec := tool.Spec{Name: "save_memory", Parameters: tool.DefaultParameters()}
	r, err := Provider(p).Call(context.Background(), Request{System: "sys", User: "hello", Tools: []tool.Spec{spec}, ToolChoice: "save_memory"})
	if err != nil {
		t.Fatal(err)
	}
	if p.got.System != "sys" || len(p.got.Messages) != 1 || p.got.Messages[0].Role != provider.RoleUser || p.got.Messages[0].Content != "hello" || len(p.got.Tools) != 1 {
		t.Errorf("request %+v", p.got)
	}
	if r.Content != "t" || r.ToolCalls[0].Arguments != `{"a":1}` || r.Usage.InputTokens != 7 || r.FinishReason != provider.FinishToolCalls {
		t.Errorf("reply %+v", r)
	}
	p.err = errors.New("openai: 503")
	if _, err := Provider(p).Call(context.Background(), Request{}); err == nil || err.Error() != "openai: 503" {
		t.Errorf("error %v", err)
	}
}
