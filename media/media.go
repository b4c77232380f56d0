// Package media holds the parts of a message that are not text: images a
// user sends and images a tool returns. It sits below both the tool and
// the provider packages so they share one type.
package media

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// MaxImageBytes bounds a picture given to the model: the smallest of
// the providers' limits (Anthropic's 5 MB per image).
const MaxImageBytes = 5 << 20

// SniffLen is how many of a file's first bytes ImageType needs.
const SniffLen = 512

// imageTypes are the pictures every provider that takes images accepts.
var imageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// ImageType is the type of the picture whose first bytes (up to
// SniffLen) are head, by its content, not its name; ok is false unless
// it is a PNG, JPEG, GIF or WebP picture, the types every provider that
// takes images accepts.
func ImageType(head []byte) (mediaType string, ok bool) {
	t := http.DetectContentType(head)
	return t, slices.Contains(imageTypes, t)
}

// Image is one picture. Either Data or URL is set.
type Image struct {
	// MediaType is the picture's type: image/png, image/jpeg, image/gif,
	// image/webp. It may be empty for a URL the provider fetches itself.
	MediaType string `json:"media_type,omitempty"`
	// Data is the picture's bytes (JSON: base64).
	Data []byte `json:"data,omitempty"`
	// URL is a remote picture (http or https) for providers that fetch it
	// themselves.
	URL string `json:"url,omitempty"`
}

// DataURL is the image as a data: URL (data:image/png;base64,...), or its
// URL when it has no bytes.
func (i Image) DataURL() string {
	if len(i.Data) == 0 {
		return i.URL
	}
	return "data:" + i.MediaType + ";base64," + base64.StdEncoding.EncodeToString(i.Data)
}

// ParseDataURL reads a data: URL with base64 content, as clients send
// images inline (OpenAI's image_url parts).
func ParseDataURL(u string) (Image, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return Image{}, fmt.Errorf("not a data: URL")
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return Image{}, fmt.Errorf("a data: URL needs a comma before its content")
	}
	mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
	if !isBase64 {
		return Image{}, fmt.Errorf("only base64 data: URLs are supported")
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return Image{}, fmt.Errorf("the data: URL's base64 content is invalid: %v", err)
	}
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	return Image{MediaType: mediaType, Data: data}, nil
}
