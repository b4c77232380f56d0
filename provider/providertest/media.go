package providertest

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// PNG and GIF are small real pictures (2×2 pixels) for image tests.
var PNG, GIF = pictures()

func pictures() (media.Image, media.Image) {
	img := image.NewPaletted(image.Rect(0, 0, 2, 2), color.Palette{color.White, color.Black})
	img.SetColorIndex(1, 1, 1)
	var p, g bytes.Buffer
	if err := png.Encode(&p, img); err != nil {
		panic(err)
	}
	if err := gif.Encode(&g, img, nil); err != nil {
		panic(err)
	}
	return media.Image{MediaType: "image/png", Data: p.Bytes()}, media.Image{MediaType: "image/gif", Data: g.Bytes()}
}

// ImageURL is a picture given by address, for providers that fetch images.
var ImageURL = media.Image{MediaType: "image/jpeg", URL: "https://example.com/cat.jpg"}

// Capture wraps a brain and keeps the turns it was asked about.
type Capture struct {
	Brain Brain
	mu    sync.Mutex
	turns []Turn
}

// Think implements Brain.
func (c *Capture) Think(t Turn) Reply {
	c.mu.Lock()
	c.turns = append(c.turns, t)
	c.mu.Unlock()
	return c.Brain(t)
}

// Last returns the last turn seen.
func (c *Capture) Last() Turn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.turns) == 0 {
		return Turn{}
	}
	return c.turns[len(c.turns)-1]
}

// CheckImageRound checks, streamed and not, that the images of a user
// message and of a tool result reach the fake byte for byte: the fake
// decodes them from the provider's wire format, and Echo mentions each in
// its answer. newProvider returns a provider connected to a fresh fake
// whose brain is the one given; withURL adds a picture given by address
// to the user message (for providers that take URLs).
func CheckImageRound(t *testing.T, newProvider func(t *testing.T, brain Brain) provider.Provider, withURL bool) {
	t.Helper()
	for _, stream := range []bool{true, false} {
		capture := &Capture{Brain: Echo}
		p := newProvider(t, capture.Think)
		images := []media.Image{PNG}
		want := "echo: what is this? [image image/png " + strconv.Itoa(len(PNG.Data)) + " bytes]"
		if withURL {
			images = append(images, ImageURL)
			want += " [image " + ImageURL.URL + "]"
		}
		msgs := []provider.Message{{Role: provider.RoleUser, Content: "what is this?", Images: images}}
		resp, err := p.Complete(context.Background(), provider.Request{System: "S", Messages: msgs, Stream: stream}, nil)
		if err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
		if resp.Text != want {
			t.Errorf("stream=%v: answer %q, want %q", stream, resp.Text, want)
		}
		got := capture.Last().Messages
		sent := got[len(got)-1].Images
		for i := range sent {
			if sent[i].URL != "" {
				sent[i].MediaType = images[i].MediaType // a URL's type is not always on the wire
			}
		}
		if diff := cmp.Diff(images, sent); diff != "" {
			t.Errorf("stream=%v: images the fake decoded (-want +got):\n%s", stream, diff)
		}

		// A tool returns a picture.
		tools := []tool.Spec{{Name: "screenshot", Parameters: tool.DefaultParameters()}}
		msgs = []provider.Message{{Role: provider.RoleUser, Content: "call screenshot"}}
		resp, err = p.Complete(context.Background(), provider.Request{Messages: msgs, Tools: tools, Stream: stream}, nil)
		if err != nil || len(resp.ToolCalls) != 1 {
			t.Fatalf("stream=%v: %+v %v", stream, resp, err)
		}
		msgs = append(msgs, resp.Message(), provider.Message{Role: provider.RoleTool, ToolCallID: resp.ToolCalls[0].ID, ToolName: "screenshot", Content: "taken", Images: []media.Image{GIF}})
		resp, err = p.Complete(context.Background(), provider.Request{Messages: msgs, Tools: tools, Stream: stream}, nil)
		if err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
		if want := "tool screenshot said: taken [image image/gif " + strconv.Itoa(len(GIF.Data)) + " bytes]"; resp.Text != want {
			t.Errorf("stream=%v: answer %q, want %q", stream, resp.Text, want)
		}
		var decoded []media.Image
		for _, m := range capture.Last().Messages {
			decoded = append(decoded, m.Images...)
		}
		if diff := cmp.Diff([]media.Image{GIF}, decoded); diff != "" {
			t.Errorf("stream=%v: tool images the fake decoded (-want +got):\n%s", stream, diff)
		}
	}
}

// CheckUnsupported checks that a request fails with a
// *provider.UnsupportedError naming the provider, and that nothing was
// sent (sent reports the number of requests the fake received).
func CheckUnsupported(t *testing.T, p provider.Provider, req provider.Request, sent func() int) {
	t.Helper()
	_, err := p.Complete(context.Background(), req, nil)
	var ue *provider.UnsupportedError
	if !errors.As(err, &ue) || ue.Provider != p.ID() || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("want an *UnsupportedError from %s, got %T %v", p.ID(), err, err)
	}
	if n := sent(); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// CheckUsageAndFinish checks, streamed and not, that answers carry the
// token usage and a normalised finish reason with the provider's own
// value: a complete answer (stop), tool calls (tool_calls), and an answer
// cut at the token limit, which the fake reports as lengthRaw (the
// provider's word for it).
func CheckUsageAndFinish(t *testing.T, newProvider func(t *testing.T, brain Brain) provider.Provider, lengthRaw string) {
	t.Helper()
	tools := []tool.Spec{{Name: "get-time", Parameters: tool.DefaultParameters()}}
	for _, stream := range []bool{true, false} {
		p := newProvider(t, Scripted(
			Reply{Chunks: []string{"Hel", "lo"}},
			Reply{Calls: []Call{{ID: "call_1", Name: "get-time", Arguments: "{}"}}},
			Reply{Chunks: []string{"Once upon"}, Finish: lengthRaw},
		))
		for _, want := range []string{provider.FinishStop, provider.FinishToolCalls, provider.FinishLength} {
			resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}, Tools: tools, Stream: stream}, nil)
			if err != nil {
				t.Fatalf("stream=%v %s: %v", stream, want, err)
			}
			if resp.FinishReason != want || (want == provider.FinishLength && resp.RawFinishReason != lengthRaw) {
				t.Errorf("stream=%v: finish %q (raw %q), want %q", stream, resp.FinishReason, resp.RawFinishReason, want)
			}
			if resp.Usage.InputTokens <= 0 || resp.Usage.OutputTokens <= 0 {
				t.Errorf("stream=%v %s: usage %+v", stream, want, resp.Usage)
			}
		}
	}
}
