package media

import (
	"bytes"
	"testing"
)

func TestDataURLRoundTrip(t *testing.T) {
	img := Image{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}
	u := img.DataURL()
	if u != "data:image/png;base64,iVBORw==" {
		t.Fatalf("DataURL = %q", u)
	}
	back, err := ParseDataURL(u)
	if err != nil {
		t.Fatal(err)
	}
	if back.MediaType != img.MediaType || !bytes.Equal(back.Data, img.Data) {
		t.Errorf("round trip = %+v", back)
	}
	for _, bad := range []string{"http://x/y.png", "data:image/png,abc", "data:image/png;base64", "data:image/png;base64,!!"} {
		if _, err := ParseDataURL(bad); err == nil {
			t.Errorf("ParseDataURL(%q) accepted it", bad)
		}
	}
	if (Image{URL: "https://x/y.png"}).DataURL() != "https://x/y.png" {
		t.Error("an image without bytes is its URL")
	}
}
