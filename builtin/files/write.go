package files

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/nbots/nb/builtin/internal/arg"
	"github.com/nbots/nb/tool"
)

// maxEditFile bounds the files edit_file rewrites (it holds them whole).
const maxEditFile = 64 << 20

// WriteFile returns the write_file tool.
func WriteFile(w *Workspace) tool.Tool { return &writeFile{w: w} }

type writeFile struct{ w *Workspace }

func (t *writeFile) Spec() tool.Spec {
	return tool.Spec{
		Name:        "write_file",
		Description: "Write a file of the workspace: create it (with its folders) or replace its whole content. The write is atomic: the file is never left half written. To change part of a file, use edit_file.",
		Parameters:  writeFileParams(),
	}
}

// writeFileParams is write_file's schema, built once on first use: a spec's Parameters are read-only
// (tool.Spec), and a turn asks every tool for its spec.
var writeFileParams = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"path":    map[string]any{"type": "string", "description": "The file's path, relative to the workspace."},
			"content": map[string]any{"type": "string", "description": "The file's whole new content."},
		},
		"required": []any{"path", "content"},
	}
})

// OutputLimits: the attractor's 1,000 characters (the answer is one line).
func (t *writeFile) OutputLimits() tool.Limits { return tool.Limits{Chars: 1000, Tail: true} }

func (t *writeFile) Run(ctx context.Context, call tool.Call) (any, error) {
	p, err := arg.String(call.Arguments, "path", true)
	if err != nil {
		return nil, err
	}
	content, err := arg.String(call.Arguments, "content", true)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(p) == "" {
		return nil, errors.New("the argument path is empty: give the file's path, relative to the workspace")
	}
	w := t.w.in(ctx)
	mode, existed, err := w.target(p)
	if err != nil {
		return nil, err
	}
	if err := w.writeAtomic(p, []byte(content), mode); err != nil {
		return nil, err
	}
	verb := "Wrote"
	if !existed {
		verb = "Created"
	}
	return fmt.Sprintf("%s %s (%d bytes).", verb, p, len(content)), nil
}

// target checks the file a write replaces: its mode is kept; a folder or
// a symbolic link is refused (an atomic rename would replace the link
// itself, not the file it points to).
func (w *Workspace) target(p string) (mode fs.FileMode, existed bool, err error) {
	name, err := w.path(p, true)
	if err != nil {
		return 0, false, err
	}
	info, err := w.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0o644, false, nil
	case err != nil:
		return 0, false, w.pathError(p, err)
	case info.Mode()&fs.ModeSymlink != 0:
		to, _ := w.root.Readlink(name)
		return 0, false, fmt.Errorf("%s is a symbolic link (to %s): write to the file it points to instead", p, to)
	case info.IsDir():
		return 0, false, fmt.Errorf("%s is a folder, not a file", p)
	case !info.Mode().IsRegular():
		return 0, false, fmt.Errorf("%s is not a regular file (%s)", p, info.Mode().Type())
	}
	return info.Mode().Perm(), true, nil
}

// writeAtomic writes data to p through a temporary file in the same
// folder, synced and renamed over p, then syncs the folder: a crash leaves
// the old content or the new, never a mix.
func (w *Workspace) writeAtomic(p string, data []byte, mode fs.FileMode) error {
	name, err := w.path(p, true)
	if err != nil {
		return err
	}
	dir := filepath.Dir(name)
	if err := w.root.MkdirAll(dir, 0o755); err != nil {
		return w.pathError(p, err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, "."+filepath.Base(name)+".nb-"+hex.EncodeToString(rnd[:])+".tmp")
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return w.pathError(p, err)
	}
	fail := func(err error) error {
		f.Close()
		_ = w.root.Remove(tmp)
		return fmt.Errorf("cannot write %s: %v", p, unwrap(err))
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Chmod(mode); err != nil { // the umask narrowed the create mode
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = w.root.Remove(tmp)
		return fmt.Errorf("cannot write %s: %v", p, unwrap(err))
	}
	if err := w.root.Rename(tmp, name); err != nil {
		_ = w.root.Remove(tmp)
		return w.pathError(p, err)
	}
	if d, err := w.root.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	w.changed(name)
	return nil
}

// EditFile returns the edit_file tool in nanobot's shape (old_text,
// new_text, replace_all); see Profile for the other shapes.
func EditFile(w *Workspace) tool.Tool { return &editTool{w: w, shape: editShapes[ProfileNanobot]} }

// readText reads a text file of the workspace whole, for the tools that
// rewrite files (named in errors), with its mode.
func (w *Workspace) readText(p, toolName string) (string, fs.FileMode, error) {
	mode, _, err := w.target(p)
	if err != nil {
		return "", 0, err
	}
	f, err := w.openRegular(p)
	if err != nil {
		return "", 0, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEditFile+1))
	f.Close()
	if err != nil {
		return "", 0, fmt.Errorf("cannot read %s: %v", p, unwrap(err))
	}
	if len(data) > maxEditFile {
		return "", 0, fmt.Errorf("%s is larger than %d MB: %s does not rewrite files that large", p, maxEditFile>>20, toolName)
	}
	if looksBinary(data[:min(len(data), sniffBytes)], true) {
		return "", 0, fmt.Errorf("%s is a binary file (not UTF-8 text): %s only edits text", p, toolName)
	}
	return string(data), mode, nil
}

// replace replaces oldText with newText in the file p: exactly once, or
// every occurrence with all, or exactly expected times when expected > 0.
// The names are the tool's own names of its arguments, for its errors.
func (w *Workspace) replace(p, oldText, newText string, all bool, expected int, names editShape) (string, error) {
	if oldText == "" {
		return "", fmt.Errorf("%s is empty: give the exact text to replace (to write a whole file, use write_file)", names.old)
	}
	if oldText == newText {
		return "", fmt.Errorf("%s and %s are the same: there is nothing to change", names.old, names.new)
	}
	content, mode, err := w.readText(p, names.name)
	if err != nil {
		return "", err
	}
	n := strings.Count(content, oldText)
	if n == 0 && strings.Contains(content, "\r\n") && !strings.Contains(oldText, "\r\n") {
		// The model copied the text from read_file, which shows lines
		// without their carriage returns: match and keep the file's CRLF.
		oldText = strings.ReplaceAll(oldText, "\n", "\r\n")
		newText = strings.ReplaceAll(newText, "\n", "\r\n")
		n = strings.Count(content, oldText)
	}
	switch {
	case n == 0:
		return "", fmt.Errorf("%s was not found in %s: it must match the file exactly, whitespace and indentation included; read the file again (read_file) and copy the text without the line numbers", names.old, p)
	case expected > 0 && n != expected:
		return "", fmt.Errorf("%s occurs %d times in %s, but %s is %d: include more of the surrounding lines, or set %s to %d", names.old, n, p, names.count, expected, names.count, n)
	case n > 1 && !all && expected == 0:
		if names.all == "" {
			return "", fmt.Errorf("%s occurs %d times in %s, but must occur exactly once: include more of the surrounding lines to make it unique, or set %s to %d to replace every occurrence", names.old, n, p, names.count, n)
		}
		return "", fmt.Errorf("%s occurs %d times in %s, but must occur exactly once: include more of the surrounding lines to make it unique, or set %s to true to replace every occurrence", names.old, n, p, names.all)
	}
	first := strings.Index(content, oldText)
	var updated string
	if n > 1 {
		updated = strings.ReplaceAll(content, oldText, newText)
	} else {
		updated = content[:first] + newText + content[first+len(oldText):]
	}
	if err := w.writeAtomic(p, []byte(updated), mode); err != nil {
		return "", err
	}
	what := "1 occurrence"
	if n > 1 {
		what = fmt.Sprintf("%d occurrences", n)
	}
	return fmt.Sprintf("Edited %s: replaced %s.\n%s", p, what, excerpt(updated, first, len(newText))), nil
}

// excerpt shows the lines around a change, numbered as read_file numbers
// them, so the model sees the result without reading the file again.
func excerpt(content string, at, size int) string {
	const context, most = 3, 40
	start := strings.Count(content[:at], "\n") + 1
	end := start + strings.Count(content[at:at+size], "\n")
	from, to := max(1, start-context), end+context
	lines := strings.Split(content, "\n")
	if strings.HasSuffix(content, "\n") {
		lines = lines[:len(lines)-1]
	}
	to = min(to, len(lines))
	if to-from+1 > most {
		to = from + most - 1
	}
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%d| %s\n", i, strings.TrimSuffix(lines[i-1], "\r"))
	}
	return strings.TrimSuffix(b.String(), "\n")
}
