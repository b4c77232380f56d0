package cohere_test

import (
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// The fake behaves as providertest.Echo does, through a whole tool round
// with two calls, streamed and not, in both API versions: the end-to-end
// tests rely on it.
func TestEchoToolRound(t *testing.T) {
	for _, options := range []map[string]any{v1, v2} {
		t.Run(options["api"].(string), func(t *testing.T) {
			providertest.CheckEchoToolRound(t, func(t *testing.T) provider.Provider {
				p, _ := setup(t, providertest.Echo, nil, options)
				return p
			})
		})
	}
}
