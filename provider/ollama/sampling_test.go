package ollama_test

import (
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// Sampling settings in Ollama's options (num_predict), beside the
// cartridge's own options.
func TestSampling(t *testing.T) {
	p, fake := setup(t, providertest.Echo)
	providertest.CheckSampling(t, p, fake.Recorder.Bodies, providertest.FullSampling(), map[string]string{
		"options.temperature": `0.25`, "options.top_p": `0.5`, "options.top_k": `7`, "options.num_predict": `42`,
		"options.seed": `1234`, "options.presence_penalty": `0.125`, "options.frequency_penalty": `0.375`, "options.num_ctx": `1024`})
	// The cartridge's options are untouched for the next request.
	providertest.CheckSampling(t, p, fake.Recorder.Bodies, provider.Sampling{}, map[string]string{"options.temperature": `0.8`, "options.num_predict": `null`})
}
