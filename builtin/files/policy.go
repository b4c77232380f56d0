package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// Policy narrows what the file tools reach in one call, beyond the
// workspace's own bounds: a front-end that serves several people from
// one workspace (the gateway) gives each turn the policy of whoever the
// turn is for, through the call's context (WithPolicy), and every file
// tool honours it: read_file, write_file, the edit tools, apply_patch,
// list_dir, glob and grep (and exec, in its sandbox). Paths are
// absolute; an entry covers itself and, when it is a folder, everything
// below it. Entries are compared without regard to case, so that a
// case-insensitive file system cannot be used to step around one.
type Policy struct {
	// Hidden are neither read, written nor listed: to the tools they do
	// not exist.
	Hidden []string
	// Visible are files that stay readable inside a Hidden folder (the
	// pictures a guest sent, inside the media folder).
	Visible []string
	// ReadOnly are read and listed, never written, moved or removed.
	ReadOnly []string
	// Watched are written as usual, and OnWrite is told of each change.
	Watched []string
	// OnWrite is told the absolute path of a Watched file a tool wrote,
	// moved or removed.
	OnWrite func(path string)
	// RequireSandbox refuses exec's commands when they would run outside
	// the sandbox, where Hidden and ReadOnly cannot be enforced.
	RequireSandbox bool
}

type policyKey struct{}

// WithPolicy returns ctx carrying p: the file tools (and exec) called
// with it honour p.
func WithPolicy(ctx context.Context, p *Policy) context.Context {
	return context.WithValue(ctx, policyKey{}, p)
}

// PolicyFrom returns the policy ctx carries, or nil.
func PolicyFrom(ctx context.Context) *Policy {
	p, _ := ctx.Value(policyKey{}).(*Policy)
	return p
}

// under reports whether path is entry or lies below it, without regard
// to case. It allocates nothing for clean paths: walks call it for every
// entry.
func under(path, entry string) bool {
	path, entry = filepath.Clean(path), filepath.Clean(entry)
	if len(path) < len(entry) || !strings.EqualFold(path[:len(entry)], entry) {
		return false
	}
	return len(path) == len(entry) || path[len(entry)] == filepath.Separator || strings.HasSuffix(entry, string(filepath.Separator))
}

func anyUnder(path string, entries []string) bool {
	for _, e := range entries {
		if e != "" && under(path, e) {
			return true
		}
	}
	return false
}

// contains reports whether path is one of the entries or a folder that
// holds one of them (a folder that holds a hidden file
// cannot be moved or removed whole).
func contains(path string, entries []string) bool {
	for _, e := range entries {
		if e != "" && under(e, path) {
			return true
		}
	}
	return false
}

// ErrHidden is the error of a path the policy hides (wrapped with the path).
var ErrHidden = errors.New("not reachable by the file tools")

// Hides reports whether the policy hides the absolute path abs.
func (p *Policy) Hides(abs string) bool {
	if p == nil {
		return false
	}
	return anyUnder(abs, p.Hidden) && !anyUnder(abs, p.Visible)
}

// Check says whether a tool may read (write false) or write the absolute
// path abs; its error names the path as display shows it and says why.
func (p *Policy) Check(abs, display string, write bool) error {
	if p == nil {
		return nil
	}
	if p.Hides(abs) || (write && anyUnder(abs, p.Hidden)) {
		return fmt.Errorf("%s: %w: the gateway keeps its own state there (sessions, cron jobs, locks), or it is not this chat's to see", display, ErrHidden)
	}
	if write && anyUnder(abs, p.ReadOnly) {
		return fmt.Errorf("%s is read-only in this chat: it shapes the assistant in every chat (bootstrap files, memory, skills), so only the owner's turns change it", display)
	}
	return nil
}

// wrote tells OnWrite of a change to abs when it is watched.
func (p *Policy) wrote(abs string) {
	if p != nil && p.OnWrite != nil && anyUnder(abs, p.Watched) {
		p.OnWrite(abs)
	}
}

// in is w as the call with ctx sees it: with the policy ctx carries.
func (w *Workspace) in(ctx context.Context) *Workspace {
	p := PolicyFrom(ctx)
	if p == nil || w.remote {
		return w
	}
	c := *w
	c.policy = p
	return &c
}

// abs is the absolute path of name (relative to the workspace, as rel
// returns it), and the same path with the symbolic links of its existing
// part resolved: a link inside the workspace to a hidden folder is the
// folder.
func (w *Workspace) abs(name string) (literal, real string) {
	literal = filepath.Join(w.dir, name)
	if filepath.IsAbs(name) {
		literal = filepath.Clean(name)
	}
	rest := ""
	for dir := literal; ; {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return literal, filepath.Join(r, rest)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return literal, literal
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return literal, literal
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// path is rel with the call's policy applied: the name for the Root, or
// the policy's refusal.
func (w *Workspace) path(p string, write bool) (string, error) {
	name, err := w.rel(p)
	if err != nil || w.policy == nil {
		return name, err
	}
	literal, real := w.abs(name)
	for _, a := range []string{literal, real, w.realDir(real)} {
		if a == "" {
			continue
		}
		if err := w.policy.Check(a, p, write); err != nil {
			return "", err
		}
	}
	if write && (contains(literal, w.policy.Hidden) || contains(literal, w.policy.ReadOnly)) && !w.isFile(name) {
		// Writing a folder's path (a patch's move) would replace what it holds.
		return "", fmt.Errorf("%s holds files the gateway protects: the file tools do not replace or move it", p)
	}
	return name, nil
}

// realDir maps a path under the workspace's real location (its symbolic
// links resolved) back under the workspace's path as opened, so that
// policy entries given under either name match.
func (w *Workspace) realDir(real string) string {
	rd, err := filepath.EvalSymlinks(w.dir)
	if err != nil || rd == w.dir {
		return ""
	}
	r, err := filepath.Rel(rd, real)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return ""
	}
	return filepath.Join(w.dir, r)
}

func (w *Workspace) isFile(name string) bool {
	fi, err := w.root.Lstat(name)
	return err == nil && !fi.IsDir()
}

// hider returns the test of whether a name found below start (both
// clean slash paths relative to the workspace) is hidden from this call.
// Walks and listings never follow the symbolic links below start, so
// start's links are resolved once and a name's real path is start's
// real path and the rest of the name; the policy's entries are made
// relative to each of start's paths once, so that an entry costs a
// comparison, not a join.
func (w *Workspace) hider(start string) func(name string) bool {
	if w.policy == nil {
		return func(string) bool { return false }
	}
	literal, real := w.abs(filepath.FromSlash(start))
	bases := []string{literal}
	for _, b := range []string{real, w.realDir(real)} {
		if b != "" && !slices.Contains(bases, b) {
			bases = append(bases, b)
		}
	}
	var hidden, visible []string
	all := false
	for _, b := range bases {
		all = all || anyUnder(b, w.policy.Hidden)
		hidden = append(hidden, below(b, w.policy.Hidden)...)
		visible = append(visible, below(b, w.policy.Visible)...)
	}
	return func(name string) bool {
		rest := name
		if start != "." {
			rest = strings.TrimPrefix(name, start+"/")
		}
		rest = filepath.FromSlash(rest)
		return (all || anyUnder(rest, hidden)) && !anyUnder(rest, visible)
	}
}

// below are the entries that lie below base, relative to it.
func below(base string, entries []string) []string {
	var out []string
	for _, e := range entries {
		e = filepath.Clean(e)
		if e != base && under(e, base) {
			out = append(out, strings.TrimPrefix(e[len(base):], string(filepath.Separator)))
		}
	}
	return out
}

// changed tells the policy a tool changed name.
func (w *Workspace) changed(name string) {
	if w.policy == nil {
		return
	}
	literal, _ := w.abs(name)
	w.policy.wrote(literal)
}

// Readable reports whether the policy carried by ctx lets a tool read the
// absolute path abs, its symbolic links resolved (nil when it does): the
// front-ends' own tools that take paths (a message's attachments) ask it.
func Readable(ctx context.Context, abs string) error {
	p := PolicyFrom(ctx)
	if p == nil {
		return nil
	}
	if err := p.Check(abs, abs, false); err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		return p.Check(real, abs, false)
	}
	return nil
}

// maxWatched bounds the files Watch records: a watched folder grown past
// it is compared on its first maxWatched files only.
const maxWatched = 10_000

type stamp struct {
	mod  int64
	size int64
}

// Watch records the watched files as they are now, for a tool that can
// change them without the file tools (exec); the function it returns
// tells OnWrite of each watched file created, changed or removed since.
func (p *Policy) Watch() (done func()) {
	if p == nil || p.OnWrite == nil || len(p.Watched) == 0 {
		return func() {}
	}
	before := p.stamps()
	return func() {
		after := p.stamps()
		var changed []string
		for f, s := range after {
			if b, ok := before[f]; !ok || b != s {
				changed = append(changed, f)
			}
		}
		for f := range before {
			if _, ok := after[f]; !ok {
				changed = append(changed, f)
			}
		}
		slices.Sort(changed)
		for _, f := range changed {
			p.OnWrite(f)
		}
	}
}

// stamps are the modification times and sizes of the watched files.
func (p *Policy) stamps() map[string]stamp {
	out := map[string]stamp{}
	for _, root := range p.Watched {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error { //nolint:errcheck // what cannot be read is not compared
			if err != nil || len(out) >= maxWatched {
				return fs.SkipDir
			}
			if d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil {
					out[path] = stamp{fi.ModTime().UnixNano(), fi.Size()}
				}
			}
			return nil
		})
	}
	return out
}
