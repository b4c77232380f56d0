package google

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/nbots/nb/provider"
)

// chunk is a GenerateContentResponse: the whole answer of :generateContent,
// or one server-sent event of :streamGenerateContent?alt=sse. A stream may
// also carry an error object instead, once the answer has begun.
type chunk struct {
	Candidates []struct {
		Content struct {
			Parts []part `json:"parts"`
		} `json:"content"`
		FinishReason  string   `json:"finishReason"`
		FinishMessage string   `json:"finishMessage"`
		Index         int      `json:"index"`
		SafetyRatings []rating `json:"safetyRatings"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason        string   `json:"blockReason"`
		BlockReasonMessage string   `json:"blockReasonMessage"`
		SafetyRatings      []rating `json:"safetyRatings"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		ThoughtsTokenCount   int `json:"thoughtsTokenCount"`
		// CachedContentTokenCount is the part of the prompt read from
		// the context cache (implicit caching on Gemini 2.5 and later).
		CachedContentTokenCount int `json:"cachedContentTokenCount"`
	} `json:"usageMetadata"`
	Error json.RawMessage `json:"error"`
}

type part struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	ThoughtSignature string  `json:"thoughtSignature"`
	FunctionCall     *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
}

type rating struct {
	Category    string `json:"category"`
	Probability string `json:"probability"`
	Blocked     bool   `json:"blocked"`
}

// decoder accumulates the chunks of one answer and emits its events.
type decoder struct {
	onEvent             func(provider.Event)
	text, reasoning     strings.Builder
	calls               []provider.ToolCall
	extra               Extra
	finish, finishMsg   string
	ratings             []rating
	blocked, blockedMsg string
	usage               provider.Usage
	streamed            bool
	seen                bool
}

func newDecoder(onEvent func(provider.Event)) *decoder {
	return &decoder{onEvent: onEvent, extra: Extra{Signatures: map[string]string{}}}
}

func (d *decoder) emit(kind provider.EventKind, text string) {
	if d.onEvent != nil {
		d.onEvent(provider.Event{Kind: kind, Text: text})
	}
}

// feed takes one GenerateContentResponse.
func (d *decoder) feed(ch *chunk) error {
	if len(ch.Error) > 0 && string(ch.Error) != "null" {
		body := append(append([]byte(`{"error":`), ch.Error...), '}')
		msg, code := provider.ParseErrorBody(body)
		var st struct {
			Code   int    `json:"code"`
			Status string `json:"status"`
		}
		json.Unmarshal(ch.Error, &st) //nolint:errcheck // code and status are optional
		retryable := st.Code == http.StatusTooManyRequests || st.Code >= 500
		if st.Status != "" {
			code = st.Status
		}
		return &provider.Error{Provider: ID, Status: st.Code, Message: "error in the stream: " + msg, Code: code,
			Streamed: d.streamed, Retryable: retryable && !d.streamed}
	}
	d.seen = true
	if ch.UsageMetadata != nil {
		u := ch.UsageMetadata
		d.usage = provider.Usage{InputTokens: u.PromptTokenCount, OutputTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount,
			ReasoningTokens: u.ThoughtsTokenCount, CacheReadTokens: u.CachedContentTokenCount}
	}
	if pf := ch.PromptFeedback; pf != nil && pf.BlockReason != "" {
		d.blocked, d.blockedMsg = pf.BlockReason, pf.BlockReasonMessage
		d.ratings = pf.SafetyRatings
	}
	for _, cand := range ch.Candidates {
		if cand.Index != 0 {
			continue // candidateCount > 1: only the first candidate is the answer
		}
		for _, p := range cand.Content.Parts {
			d.part(p)
		}
		if cand.FinishReason != "" {
			d.finish, d.finishMsg = cand.FinishReason, cand.FinishMessage
		}
		if len(cand.SafetyRatings) > 0 {
			d.ratings = cand.SafetyRatings
		}
	}
	return nil
}

func (d *decoder) part(p part) {
	switch {
	case p.FunctionCall != nil:
		fc := p.FunctionCall
		id := fc.ID
		if id == "" {
			id = provider.NewCallID()
		} else {
			d.extra.CallIDs = append(d.extra.CallIDs, id)
		}
		args := strings.TrimSpace(string(fc.Args))
		if args == "" || args == "null" {
			args = "{}"
		}
		if p.ThoughtSignature != "" {
			d.extra.Signatures[id] = p.ThoughtSignature
		}
		d.emit(provider.ToolCallStarted, fc.Name)
		d.calls = append(d.calls, provider.ToolCall{ID: id, Name: fc.Name, Arguments: args})
	case p.Thought:
		if p.Text != nil && *p.Text != "" {
			d.reasoning.WriteString(*p.Text)
			d.emit(provider.ReasoningDelta, *p.Text)
		}
		if p.ThoughtSignature != "" {
			d.extra.TextSignature = p.ThoughtSignature
		}
	default:
		if p.Text != nil && *p.Text != "" {
			d.text.WriteString(*p.Text)
			d.streamed = true
			d.emit(provider.TextDelta, *p.Text)
		}
		if p.ThoughtSignature != "" {
			d.extra.TextSignature = p.ThoughtSignature
		}
	}
}

// stream reads the server-sent events of :streamGenerateContent?alt=sse.
// There is no end marker and no keep-alive event: finishReason arrives on
// the last chunk, and the answer ends when the HTTP response does.
func (d *decoder) stream(ctx context.Context, body io.Reader) (*provider.Response, error) {
	sse := provider.NewSSEReader(body)
	defer sse.Close()
	for {
		ev, err := sse.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, provider.ReadError(ctx, ID, err, d.streamed)
		}
		data := strings.TrimSpace(string(ev.Data))
		if data == "" {
			continue
		}
		var ch chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable stream event %q: %v", provider.Clip(data), err), Streamed: d.streamed}
		}
		if err := d.feed(&ch); err != nil {
			return nil, err
		}
	}
	if d.finish == "" && d.blocked == "" {
		return nil, provider.Incomplete(ID, d.streamed)
	}
	return d.result()
}

// whole reads the answer of :generateContent.
func (d *decoder) whole(data []byte) (*provider.Response, error) {
	var ch chunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable response %q: %v", provider.Clip(string(data)), err)}
	}
	if err := d.feed(&ch); err != nil {
		return nil, err
	}
	return d.result()
}

// safetyReasons are the finish reasons that mean the answer was withheld.
var safetyReasons = map[string]bool{
	"SAFETY": true, "BLOCKLIST": true, "PROHIBITED_CONTENT": true, "SPII": true,
	"IMAGE_SAFETY": true, "IMAGE_PROHIBITED_CONTENT": true,
}

// FinishReason maps Gemini's finishReason to the common values: stop,
// length, tool_calls (whenever there are calls: Gemini says STOP),
// content_filter (the safety reasons and RECITATION), other.
func FinishReason(raw string, hasCalls bool) string {
	return provider.NormalizeFinishReason(raw, hasCalls)
}

func (d *decoder) result() (*provider.Response, error) {
	text := d.text.String()
	if d.blocked != "" && text == "" && len(d.calls) == 0 {
		msg := "the prompt was blocked (" + d.blocked + ")"
		if d.blockedMsg != "" {
			msg += ": " + d.blockedMsg
		}
		return nil, &provider.Error{Provider: ID, Message: msg + d.ratingText(), Code: d.blocked}
	}
	if text == "" && len(d.calls) == 0 && d.finish != "" && d.finish != "STOP" && d.finish != "MAX_TOKENS" {
		var msg string
		switch {
		case safetyReasons[d.finish]:
			msg = "generation stopped for safety reasons (" + d.finish + ")"
		case d.finish == "RECITATION":
			msg = "generation stopped for recitation reasons (" + d.finish + ")"
		default:
			msg = "generation stopped (" + d.finish + ")"
		}
		if d.finishMsg != "" {
			msg += ": " + d.finishMsg
		}
		return nil, &provider.Error{Provider: ID, Message: msg + d.ratingText(), Code: d.finish}
	}
	resp := &provider.Response{
		Text:      text,
		Reasoning: d.reasoning.String(),
		ToolCalls: d.calls,
		Usage:     d.usage,
	}
	resp.SetFinishReason(d.finish)
	// Calls always carry the entry, even empty: it says the calls came
	// from Gemini, so no placeholder signature is sent for them.
	if len(d.calls) > 0 || d.extra.TextSignature != "" {
		resp.Extra = map[string]any{ID: d.extra.Map()}
	}
	return resp, nil
}

// ratingText lists the safety categories that blocked the answer, or
// were rated above NEGLIGIBLE.
func (d *decoder) ratingText() string {
	var s []string
	for _, r := range d.ratings {
		if r.Blocked || (r.Probability != "" && r.Probability != "NEGLIGIBLE") {
			s = append(s, r.Category+": "+r.Probability)
		}
	}
	if len(s) == 0 {
		return ""
	}
	return " [" + strings.Join(s, ", ") + "]"
}
