package openai

import (
	"fmt"
	"maps"
	"strings"
)

// ResponsesByDefault reports whether a cartridge that names no API
// (provider.options.api) speaks the Responses API on OpenAI's own address:
// when its model is one of OpenAI's reasoning models (gpt-5…, o1…, o3…,
// o4…, …codex…), whose reasoning only the Responses API carries from one
// tool round to the next, and its settings are all ones the Responses API
// takes (or that nb renames for it, responsesRenames). A cartridge whose
// settings name a key only Chat Completions knows (stop, n, logprobs,
// response_format, …) stays on Chat Completions, where they mean what its
// author meant.
func ResponsesByDefault(settings map[string]any) bool {
	model, _ := settings["model"].(string)
	if !ReasoningModel(model) {
		return false
	}
	for k, v := range settings {
		if v != nil && !responsesKeys[k] && responsesRenames[k] == "" {
			return false
		}
	}
	return true
}

// ReasoningModel reports whether model names one of OpenAI's reasoning
// models: gpt-5 and its versions and sizes, the o-series (o1, o3, o4 and
// their -mini, -pro variants) and the codex models. A provider prefix
// ("openai/") is ignored.
func ReasoningModel(model string) bool {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	if strings.HasPrefix(m, "gpt-5") || strings.Contains(m, "codex") {
		return true
	}
	for _, o := range []string{"o1", "o3", "o4"} {
		if m == o || strings.HasPrefix(m, o+"-") {
			return true
		}
	}
	return false
}

// responsesKeys are the request body's keys the Responses API takes from a
// cartridge's settings (https://platform.openai.com/docs/api-reference/responses/create).
var responsesKeys = map[string]bool{
	"model": true, "temperature": true, "top_p": true, "max_output_tokens": true, "reasoning": true,
	"text": true, "tool_choice": true, "parallel_tool_calls": true, "truncation": true, "metadata": true,
	"service_tier": true, "prompt_cache_key": true, "prompt_cache_retention": true, "safety_identifier": true,
	"user": true, "include": true, "store": true, "top_logprobs": true, "max_tool_calls": true,
	"background": true, "prompt": true, "stream_options": true, "stream": true,
}

// responsesRenames are Chat Completions settings that have another name
// (a dotted path) in the Responses API; the Responses client moves them.
var responsesRenames = map[string]string{
	"max_completion_tokens": "max_output_tokens",
	"max_tokens":            "max_output_tokens",
	"reasoning_effort":      "reasoning.effort",
	"verbosity":             "text.verbosity",
}

// renameForResponses moves the Chat Completions names of body's settings
// to their Responses API places (a value already there wins), and drops
// Chat Completions' stream_options.include_usage, which the Responses API
// refuses and does not need (it always reports the usage).
func renameForResponses(body map[string]any) error {
	for from, to := range responsesRenames {
		v, ok := body[from]
		if !ok {
			continue
		}
		delete(body, from)
		parent, key := body, to
		if outer, inner, nested := strings.Cut(to, "."); nested {
			m, isMap := body[outer].(map[string]any)
			if body[outer] != nil && !isMap {
				return fmt.Errorf("%s: provider.settings.%s: want a mapping to hold %s (from %s)", ID, outer, inner, from)
			}
			if m == nil {
				m = map[string]any{}
			} else {
				m = maps.Clone(m)
			}
			body[outer] = m
			parent, key = m, inner
		}
		if _, set := parent[key]; !set {
			parent[key] = v
		}
	}
	if so, ok := body["stream_options"].(map[string]any); ok {
		if _, has := so["include_usage"]; has {
			so = maps.Clone(so)
			delete(so, "include_usage")
			if len(so) == 0 {
				delete(body, "stream_options")
			} else {
				body["stream_options"] = so
			}
		}
	}
	return nil
}
