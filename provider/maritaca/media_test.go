package maritaca_test

import (
	"testing"

	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

func TestUsageAndFinish(t *testing.T) {
	providertest.CheckUsageAndFinish(t, func(t *testing.T, brain providertest.Brain) provider.Provider {
		p, _ := setup(t, brain, nil, nil)
		return p
	}, "length")
}

// Maritaca takes text only, on both APIs: images, in a user message or a
// tool result, fail before anything is sent.
func TestImagesRefused(t *testing.T) {
	for _, options := range []map[string]any{nil, {"api": "inference"}} {
		for name, m := range map[string]provider.Message{
			"user": {Role: provider.RoleUser, Content: "x", Images: []media.Image{providertest.PNG}},
			"tool": {Role: provider.RoleTool, ToolCallID: "c", ToolName: "f", Content: "x", Images: []media.Image{providertest.PNG}},
		} {
			t.Run(name, func(t *testing.T) {
				p, fake := setup(t, providertest.Echo, nil, options)
				providertest.CheckUnsupported(t, p, provider.Request{Messages: []provider.Message{m}}, func() int { return len(fake.Recorder.Bodies()) })
			})
		}
	}
}
