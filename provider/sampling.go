package provider

import (
	"strings"
)

// Override is what one exchange changes in the cartridge's provider
// settings, whichever front-end asked: Settings in the provider's own
// keys, merged into the cartridge's (see Config.BodyFor), and Sampling,
// a typed view of the common sampling settings that each provider writes
// under its own keys (SamplingNames), over Settings. The OpenAI-compatible
// server fills Sampling from a client's temperature, top_p...; an agent
// client's parameters are in the provider's keys and fill Settings.
type Override struct {
	Sampling Sampling
	Settings map[string]any
}

// Apply writes o's sampling view into body, a body BodyFor started from
// the cartridge's settings and o's (see Sampling.Apply). A nil o does
// nothing.
func (o *Override) Apply(body map[string]any, providerID string, names SamplingNames) error {
	if o == nil {
		return nil
	}
	return o.Sampling.Apply(body, providerID, names)
}

// IsZero reports whether o changes nothing.
func (o *Override) IsZero() bool {
	return o == nil || (o.Sampling.IsZero() && len(o.Settings) == 0)
}

// Sampling are the sampling settings of one request, as a client of nb's
// server asks for them; a nil field keeps the cartridge's setting, or the
// API's default. (Stop sequences are Request.Stop.) Each provider sends them under its own
// names and places (SamplingNames), over the cartridge's settings. The
// names in comments are the OpenAI spellings used in messages.
type Sampling struct {
	Temperature *float64 // temperature
	TopP        *float64 // top_p
	TopK        *int     // top_k
	// MaxTokens bounds the answer, in tokens: max_tokens,
	// max_completion_tokens or max_output_tokens for the client.
	MaxTokens        *int     // max_tokens
	Seed             *int64   // seed
	PresencePenalty  *float64 // presence_penalty
	FrequencyPenalty *float64 // frequency_penalty
}

// SamplingNames say where an API takes each sampling setting in its
// request body: a key, or a dotted path of keys ("options.num_predict",
// "generationConfig.topP"); "" when the API has no such setting.
type SamplingNames struct {
	Temperature, TopP, TopK, MaxTokens, Seed, PresencePenalty, FrequencyPenalty string
}

// Apply writes the settings s sets into body, under names, replacing the
// cartridge's values. Maps on a path are copied before they are written,
// so a body that shares them with a configuration leaves it untouched. A
// setting the API does not have fails the request before it is sent,
// with an *UnsupportedError naming it: a client's setting is never
// dropped silently. A nil s does nothing.
func (s *Sampling) Apply(body map[string]any, providerID string, names SamplingNames) error {
	if s == nil {
		return nil
	}
	var missing []string
	set := func(name, path string, v any) {
		if path == "" {
			missing = append(missing, name)
			return
		}
		setPath(body, strings.Split(path, "."), v)
	}
	if s.Temperature != nil {
		set("temperature", names.Temperature, *s.Temperature)
	}
	if s.TopP != nil {
		set("top_p", names.TopP, *s.TopP)
	}
	if s.TopK != nil {
		set("top_k", names.TopK, *s.TopK)
	}
	if s.MaxTokens != nil {
		set("max_tokens", names.MaxTokens, *s.MaxTokens)
	}
	if s.Seed != nil {
		set("seed", names.Seed, *s.Seed)
	}
	if s.PresencePenalty != nil {
		set("presence_penalty", names.PresencePenalty, *s.PresencePenalty)
	}
	if s.FrequencyPenalty != nil {
		set("frequency_penalty", names.FrequencyPenalty, *s.FrequencyPenalty)
	}
	if len(missing) > 0 {
		return &UnsupportedError{Provider: providerID, Feature: "the sampling settings " + strings.Join(missing, ", "), Hint: "this API has no such setting: leave it out of the request"}
	}
	return nil
}

// IsZero reports whether s sets nothing.
func (s *Sampling) IsZero() bool {
	return s == nil || (s.Temperature == nil && s.TopP == nil && s.TopK == nil && s.MaxTokens == nil &&
		s.Seed == nil && s.PresencePenalty == nil && s.FrequencyPenalty == nil)
}

// setPath sets m[path...] = v, copying the maps on the way.
func setPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, _ := m[k].(map[string]any)
		copied := make(map[string]any, len(next)+1)
		for kk, vv := range next {
			copied[kk] = vv
		}
		m[k] = copied
		m = copied
	}
	m[path[len(path)-1]] = v
}
