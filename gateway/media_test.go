package gateway

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/gateway/bus"
	_ "github.com/nbots/nb/provider/maritaca"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// mediaGateway runs a gateway on the real runtime with the provider
// (openai takes images, maritaca does not) against a fake model that
// records what it was sent.
func mediaGateway(t *testing.T, providerID string) (*harness, *[]providertest.Turn, string) {
	t.Helper()
	var mu sync.Mutex
	var turns []providertest.Turn
	model := httptest.NewServer(openaitest.New(func(tn providertest.Turn) providertest.Reply {
		mu.Lock()
		turns = append(turns, tn)
		mu.Unlock()
		return providertest.Reply{Chunks: []string{"seen"}}
	}))
	t.Cleanup(model.Close)
	src := fmt.Sprintf("provider: {id: %s, credentials: {address: %q, access-token: k, api-key: k}, settings: {model: m}}\nsafety: {tools: {confirmable: false}}\n", providerID, model.URL)
	cart, err := cartridge.Parse([]byte(src), "", cartridge.FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	bt, err := bot.New(context.Background(), cart, bot.Host{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bt.Close() })
	h, dir := newHarnessWith(t, BotRunner{Bot: bt})
	return h, &turns, dir
}

// stored writes a file into the workspace's media folder.
func stored(t *testing.T, ws, name string, data []byte) string {
	t.Helper()
	dir := filepath.Join(ws, "media", "telegram")
	os.MkdirAll(dir, 0o700)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestInboundPicturesGoToTheModel(t *testing.T) {
	h, turns, ws := mediaGateway(t, "openai")
	pic := stored(t, ws, "1_1_photo.jpg", pngBytes(t)) // the name lies: the content decides
	doc := stored(t, ws, "1_2_doc.pdf", []byte("%PDF-1.4 not a picture"))
	outside := filepath.Join(t.TempDir(), "elsewhere.png")
	os.WriteFile(outside, pngBytes(t), 0o600)
	m := tg("look\n[photo: " + pic + "]")
	m.Media = []string{pic, doc, outside}
	h.send(t, m)
	if r := h.next(t); r.Content != "seen" {
		t.Fatalf("reply %+v", r)
	}
	h.send(t, tg("and now?"))
	h.next(t)
	if len(*turns) != 2 {
		t.Fatalf("%d model calls", len(*turns))
	}
	first := (*turns)[0].Messages
	user := first[len(first)-1]
	if len(user.Images) != 1 || user.Images[0].MediaType != "image/png" || !bytes.Equal(user.Images[0].Data, pngBytes(t)) {
		t.Errorf("the model got images %s", providertest.DescribeImages(user.Images))
	}
	if !strings.Contains(user.Content, "[photo: "+pic+"]") || !strings.Contains(user.Content, "[file: "+doc+"]") || !strings.Contains(user.Content, "[file: "+outside+"]") || strings.Count(user.Content, pic) != 1 {
		t.Errorf("the text does not name each file once: %q", user.Content)
	}
	for _, msg := range (*turns)[1].Messages {
		if len(msg.Images) > 0 {
			t.Errorf("the next turn sent the picture again (%s message)", msg.Role)
		}
	}
	sess, _ := h.g.Sessions.Get(t.Context(), "telegram:1")
	b, _ := os.ReadFile(sess.Path)
	if bytes.Contains(b, []byte("base64")) || bytes.Contains(b, []byte("iVBOR")) || !bytes.Contains(b, []byte(pic)) {
		t.Errorf("the session keeps more than the text naming the file:\n%s", b)
	}
}

func TestPicturesToAModelWithoutImages(t *testing.T) {
	h, turns, ws := mediaGateway(t, "maritaca")
	pic := stored(t, ws, "1_1_photo.png", pngBytes(t))
	m := tg("what is this?")
	m.Media = []string{pic}
	h.send(t, m)
	if r := h.next(t); r.Kind != bus.Message || r.Content != "seen" {
		t.Fatalf("reply %+v", r)
	}
	if len(*turns) != 1 {
		t.Fatalf("%d model calls", len(*turns))
	}
	msgs := (*turns)[0].Messages
	user := msgs[len(msgs)-1]
	if user.Role != "user" || len(user.Images) != 0 || user.Content != "what is this?\n[file: "+pic+"]" {
		t.Errorf("the model got %+v", user)
	}
	users := 0
	for _, msg := range msgs {
		if msg.Role == "user" {
			users++
		}
	}
	if users != 1 {
		t.Errorf("the question was recorded %d times", users)
	}
}
