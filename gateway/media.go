package gateway

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nbots/nb/media"
)

// turnMedia prepares what came with a message for the model: the
// pictures among paths (PNG, JPEG, GIF or WebP by their content, stored
// under the workspace's media folder, up to media.MaxImageBytes) as images, and
// the text with a note naming each file it does not already name, so a
// model that takes no images, or a file that is not one, is still known
// by its path (the agent's file tools can read it).
func (g *Gateway) turnMedia(content string, paths []string) (string, []media.Image) {
	var images []media.Image
	var notes []string
	for _, p := range paths {
		img, err := g.readImage(p)
		switch {
		case err != nil:
			g.log().Warn("media not given to the model as an image", "path", p, "err", err)
		case img != nil:
			images = append(images, *img)
		}
		if !strings.Contains(content, p) {
			notes = append(notes, fmt.Sprintf("[file: %s]", p))
		}
	}
	if len(notes) > 0 {
		content = strings.TrimSpace(content + "\n" + strings.Join(notes, "\n"))
	}
	return content, images
}

// readImage reads path when it is a picture in the workspace's media
// folder; nil, nil when it is another kind of file.
func (g *Gateway) readImage(path string) (*media.Image, error) {
	if g.Prompt == nil || g.Prompt.Workspace == "" {
		return nil, fmt.Errorf("no workspace")
	}
	dir, err := filepath.Abs(filepath.Join(g.Prompt.Workspace, "media"))
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if rel, err := filepath.Rel(dir, abs); err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("not under %s", dir)
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, media.SniffLen)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF {
		return nil, err
	}
	typ, ok := media.ImageType(head[:n])
	if !ok {
		return nil, nil
	}
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > media.MaxImageBytes {
		return nil, fmt.Errorf("%d bytes, over the %d a picture may have for the model", info.Size(), media.MaxImageBytes)
	}
	data := make([]byte, info.Size())
	copy(data, head[:n])
	if _, err := io.ReadFull(f, data[n:]); err != nil {
		return nil, err
	}
	return &media.Image{MediaType: typ, Data: data}, nil
}
