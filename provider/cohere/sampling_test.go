package cohere_test

import (
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// Sampling settings under Cohere's names (p, k), on v2
// and v1.
func TestSampling(t *testing.T) {
	want := map[string]string{"model": `"command-r-plus"`, "temperature": `0.25`, "p": `0.5`, "k": `7`, "max_tokens": `42`, "seed": `1234`, "presence_penalty": `0.125`, "frequency_penalty": `0.375`}
	for _, options := range []map[string]any{nil, v1} {
		p, fake := setup(t, providertest.Echo, nil, options)
		providertest.CheckSampling(t, p, fake.Recorder.Bodies, providertest.FullSampling(), want)
	}
}

var _ provider.Sampling
