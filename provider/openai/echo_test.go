package openai_test

import (
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// The fake behaves as providertest.Echo does, through a whole tool round
// with two calls, streamed and not: the end-to-end tests rely on it.
func TestEchoToolRound(t *testing.T) {
	providertest.CheckEchoToolRound(t, func(t *testing.T) provider.Provider {
		p, _ := setup(t, providertest.Echo, nil)
		return p
	})
}
