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

// ImageType knows a picture by its bytes: the four types every provider
// takes, and nothing else (an SVG is text, a BMP no provider takes).
func TestImageType(t *testing.T) {
	for _, tc := range []struct {
		head string
		want string
		ok   bool
	}{
		{"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image/png", true},
		{"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg", true},
		{"GIF89a\x01\x00", "image/gif", true},
		{"RIFF\x24\x00\x00\x00WEBPVP8 ", "image/webp", true},
		{"BM\x36\x00\x00\x00", "image/bmp", false},
		{"<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"/>", "text/xml; charset=utf-8", false},
		{"package main\n", "text/plain; charset=utf-8", false},
	} {
		if got, ok := ImageType([]byte(tc.head)); got != tc.want || ok != tc.ok {
			t.Errorf("ImageType(%q) = %q, %v; want %q, %v", tc.head, got, ok, tc.want, tc.ok)
		}
	}
}
