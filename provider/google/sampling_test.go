package google_test

import (
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// Sampling settings in Gemini's generationConfig, beside the
// cartridge's own generationConfig settings.
func TestSampling(t *testing.T) {
	p, fake := setup(t, providertest.Echo, map[string]any{"generationConfig": map[string]any{"temperature": 1.5, "candidateCount": 1}})
	providertest.CheckSampling(t, p, fake.Recorder.Bodies, providertest.FullSampling(), map[string]string{
		"generationConfig.temperature": `0.25`, "generationConfig.topP": `0.5`, "generationConfig.topK": `7`, "generationConfig.maxOutputTokens": `42`, "generationConfig.seed": `1234`, "generationConfig.presencePenalty": `0.125`,
		"generationConfig.frequencyPenalty": `0.375`, "generationConfig.candidateCount": `1`})
}

var _ provider.Sampling
