package channel

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/nbots/nb/gateway/bus"
)

// Attachment is a file the assistant sends with a message.
type Attachment struct {
	// Name is the file's base name.
	Name string
	// Type is its media type: from its extension, else from its content.
	Type string
	Data []byte
}

// Attachments reads the files an outbound message names (bus.Outbound's
// Media) for sending: each must be a regular file inside the workspace
// (a relative path is taken from the workspace; links are resolved
// first, so none leads out of it) of at most limit bytes. A file that
// cannot be sent is left out, and notes says which and why, one line
// each, for the message's text: the person learns of it, the rest still
// goes.
func (e Env) Attachments(paths []string, limit int64) (files []Attachment, notes string) {
	var lines []string
	for _, p := range paths {
		a, err := e.attachment(p, limit)
		if err != nil {
			lines = append(lines, fmt.Sprintf("(%s not attached: %v)", filepath.Base(p), err))
			continue
		}
		files = append(files, a)
	}
	if len(lines) > 0 {
		notes = "\n\n" + strings.Join(lines, "\n")
	}
	return files, notes
}

func (e Env) attachment(p string, limit int64) (Attachment, error) {
	if e.Workspace == "" {
		return Attachment{}, errors.New("no workspace to send files from")
	}
	ws, err := filepath.EvalSymlinks(e.Workspace)
	if err != nil {
		return Attachment{}, fmt.Errorf("workspace: %w", err)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(e.Workspace, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return Attachment{}, errors.New("no such file")
	}
	if rel, err := filepath.Rel(ws, real); err != nil || !filepath.IsLocal(rel) {
		return Attachment{}, errors.New("outside the workspace")
	}
	f, err := os.Open(real)
	if err != nil {
		return Attachment{}, errors.New("unreadable")
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return Attachment{}, errors.New("not a regular file")
	}
	if info.Size() > limit {
		return Attachment{}, fmt.Errorf("%d bytes, over the platform's %d", info.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil || int64(len(data)) > limit {
		return Attachment{}, errors.New("unreadable")
	}
	typ := mime.TypeByExtension(filepath.Ext(real))
	if typ == "" {
		typ = http.DetectContentType(data)
	}
	if mt, _, err := mime.ParseMediaType(typ); err == nil {
		typ = mt // parameters (a text's charset) are the platform's business
	}
	return Attachment{Name: filepath.Base(p), Type: typ, Data: data}, nil
}

// Outgoing is what a channel sends for m: its text, with a note for each
// file that cannot go, and the files of its Media (for a final Message
// only: progress and hints carry none), each at most limit bytes.
func (e Env) Outgoing(m bus.Outbound, limit int64) (content string, files []Attachment) {
	if len(m.Media) == 0 || m.Kind != bus.Message {
		return m.Content, nil
	}
	files, notes := e.Attachments(m.Media, limit)
	return m.Content + notes, files
}
