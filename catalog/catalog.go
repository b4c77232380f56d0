// Package catalog keeps the bots of folders of cartridges loaded for a
// long-running front-end: it finds the cartridges under its folders,
// builds one bot per cartridge and rebuilds it when its file changes,
// reports the cartridges that failed to load with why, and hands bots out
// under leases so a reload never closes a bot under an exchange. It
// knows no transport: front-ends (nb serve's APIs, the agent protocol,
// the MCP server, the gateway) filter it by what their client may use
// and put its *Error on their own wire.
package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
)

// DefaultID is the id of the built-in default cartridge.
const DefaultID = "-"

// Model is one cartridge of the catalog: its id (the path relative to
// its folder without the extension, or "-"), what loading it gave, and
// when its file last changed. A cartridge that failed to load has Err set
// and, when its file could at least be parsed, Cartridge.
type Model struct {
	ID        string
	Path      string // "" for the built-in default
	Cartridge *cartridge.Cartridge
	Bot       *bot.Bot
	Err       error
	Modified  time.Time
}

// Filter says whether a client may use the cartridge id; nil allows
// every cartridge.
type Filter func(id string) bool

func (f Filter) allows(id string) bool { return f == nil || f(id) }

// Kind is why the catalog did not give a bot.
type Kind int

// The kinds of Error.
const (
	// NotFound: no cartridge has the id.
	NotFound Kind = iota + 1
	// NotAllowed: the filter refuses the id.
	NotAllowed
	// Broken: the cartridge failed to load (Err says why).
	Broken
	// Reloading: the cartridge was replaced between the lookup and the
	// lease, three times in a row.
	Reloading
)

// Error is a cartridge the catalog cannot give: its id, why, and for
// Broken the load error.
type Error struct {
	Kind Kind
	ID   string
	Err  error
}

func (e *Error) Error() string {
	switch e.Kind {
	case NotFound:
		return fmt.Sprintf("there is no cartridge %q", e.ID)
	case NotAllowed:
		return fmt.Sprintf("the cartridge %q is not allowed", e.ID)
	case Broken:
		return fmt.Sprintf("the cartridge %q failed to load: %v", e.ID, e.Err)
	case Reloading:
		return fmt.Sprintf("the cartridge %q is being reloaded: try again", e.ID)
	}
	return fmt.Sprintf("the cartridge %q is not available", e.ID)
}

// Unwrap returns the load error of a Broken cartridge.
func (e *Error) Unwrap() error { return e.Err }

// Options configure a Catalog.
type Options struct {
	// Dirs are the folders whose cartridges are served, in lookup order.
	Dirs []string
	// Host builds the bots; its Warn is replaced by the catalog's log.
	Host bot.Host
	// Lookup resolves the cartridges' ENV references (nil: none).
	Lookup cartridge.Lookup
	// Log receives a line per cartridge loaded, changed, removed or
	// broken; nil discards it.
	Log *slog.Logger
}

// Catalog is the cartridges of a set of folders and the built-in
// default, each with its bot kept up to date.
type Catalog struct {
	opts Options
	dirs []string
	log  *slog.Logger

	scanMu  sync.Mutex // one Rescan at a time
	scanned bool       // the first Rescan is done (under scanMu)
	mu      sync.RWMutex
	entries map[string]*entry
	def     *entry
	closed  bool
}

// entry is a cartridge of the catalog.
type entry struct {
	Model
	size   int64
	served *served // nil when the bot could not be built
}

// New builds the default cartridge's bot, then loads the cartridges of
// opts.Dirs (see Rescan).
func New(ctx context.Context, opts Options) *Catalog {
	c := &Catalog{opts: opts, log: opts.Log, entries: map[string]*entry{}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	for _, d := range opts.Dirs {
		if d = strings.TrimSpace(d); d != "" {
			c.dirs = append(c.dirs, d)
		}
	}
	c.loadDefault(ctx)
	c.Rescan(ctx)
	return c
}

// Dirs are the folders of the catalog.
func (c *Catalog) Dirs() []string { return append([]string(nil), c.dirs...) }

// Watch calls Rescan every interval until ctx ends.
func (c *Catalog) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Rescan(ctx)
		}
	}
}

// loadError is why a cartridge failed to load, as clients see it: its
// file named relative to its folder (clients need not know where the
// operator keeps cartridges). The log has the whole path.
type loadError struct {
	msg string
	err error
}

func (e *loadError) Error() string { return e.msg }
func (e *loadError) Unwrap() error { return e.err }

func relative(err error, dir string) error {
	if err == nil {
		return nil
	}
	return &loadError{msg: strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""), err: err}
}

// Rescan looks for cartridges added, changed or removed in the folders
// and (re)builds their bots. A cartridge that fails to load is logged
// once per change and listed with its error; it never stops the others.
func (c *Catalog) Rescan(ctx context.Context) {
	c.scanMu.Lock()
	defer c.scanMu.Unlock()
	files := c.scan()
	c.mu.RLock()
	old, closed := c.entries, c.closed
	c.mu.RUnlock()
	if closed {
		return
	}

	next := make(map[string]*entry, len(files))
	var retired []*served
	for _, f := range files {
		if e, ok := old[f.ID]; ok && e.Path == f.Path && e.Modified.Equal(f.Modified) && e.size == f.Size {
			next[f.ID] = e
			continue
		}
		e := c.load(ctx, f)
		if e == nil {
			if prev, ok := old[f.ID]; ok && prev.served != nil {
				retired = append(retired, prev.served)
			}
			continue
		}
		next[f.ID] = e
		if prev, ok := old[f.ID]; ok && prev.served != nil {
			retired = append(retired, prev.served)
		}
		if _, existed := old[f.ID]; existed {
			c.log.Info("cartridge reloaded", "cartridge", f.ID, "path", f.Path, "ok", e.Err == nil)
		} else if c.scanned {
			c.log.Info("cartridge added", "cartridge", f.ID, "path", f.Path, "ok", e.Err == nil)
		}
	}
	for id, e := range old {
		if _, ok := next[id]; ok {
			continue
		}
		if e.served != nil && !slices.Contains(retired, e.served) {
			retired = append(retired, e.served)
		}
		c.log.Info("cartridge removed", "cartridge", id, "path", e.Path)
	}
	c.mu.Lock()
	if c.closed {
		// Closed meanwhile: what was just built goes too.
		for _, e := range next {
			if e.served != nil {
				retired = append(retired, e.served)
			}
		}
	} else {
		c.entries = next
	}
	c.mu.Unlock()
	c.scanned = true
	for _, b := range retired {
		b.retire()
	}
}

// scan lists the cartridge files of the folders: ids in folder order, the
// first folder (then the first extension) that has an id wins.
func (c *Catalog) scan() []File {
	var out []File
	seen := map[string]bool{}
	for _, dir := range c.dirs {
		for _, f := range Find(dir, 0) {
			if seen[f.ID] || f.ID == DefaultID {
				continue
			}
			seen[f.ID] = true
			out = append(out, f)
		}
	}
	return out
}

// File is a file with a cartridge extension found in a folder (a
// cartridge, or a robopage: Find does not read them).
type File struct {
	// ID is the path relative to Dir without the extension, with
	// slashes.
	ID, Path, Dir string
	Modified      time.Time
	Size          int64
	// Err is set for a symbolic link that leads outside Dir: it must not
	// be read.
	Err error
}

// Find lists the files of dir with a cartridge extension, in its
// subfolders down to maxDepth levels (0: all; 1: dir itself), sorted by id
// then by the extension order of name lookup. Hidden files and folders
// are skipped. A symbolic link to a file is followed while it stays
// inside dir; one that leads outside is listed with Err set, and links to
// folders are not followed. A folder that cannot be read lists nothing.
func Find(dir string, maxDepth int) []File {
	var files []File
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error { //nolint:errcheck // errors are skipped one by one
		if err != nil {
			if p == dir {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if p != dir && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if p != dir && maxDepth > 0 && strings.Count(filepath.ToSlash(rel), "/")+1 >= maxDepth {
				return filepath.SkipDir
			}
			return nil
		}
		ext := strings.ToLower(filepath.Ext(name))
		if !slices.Contains(cartridge.Extensions, ext) {
			return nil
		}
		id := filepath.ToSlash(strings.TrimSuffix(rel, filepath.Ext(rel)))
		if d.Type()&fs.ModeSymlink != 0 {
			if err := staysInside(dir, p); err != nil {
				li, lerr := os.Lstat(p)
				if lerr == nil && !errors.Is(err, fs.ErrNotExist) {
					files = append(files, File{ID: id, Path: p, Dir: dir, Modified: li.ModTime(), Size: li.Size(), Err: err})
				}
				return nil
			}
		}
		info, err := os.Stat(p) // follows a symlinked file
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		files = append(files, File{ID: id, Path: p, Dir: dir, Modified: info.ModTime(), Size: info.Size()})
		return nil
	})
	sort.SliceStable(files, func(i, j int) bool {
		if files[i].ID != files[j].ID {
			return files[i].ID < files[j].ID
		}
		return extRank(files[i].Path) < extRank(files[j].Path)
	})
	return files
}

func extRank(p string) int {
	return slices.Index(cartridge.Extensions, strings.ToLower(filepath.Ext(p)))
}

// staysInside says why the symbolic link p of dir is not served: it
// leads outside dir (or nowhere, fs.ErrNotExist). Like os.Root, a served
// folder serves only what is inside it; unlike os.Root, a link written as
// an absolute path that stays inside is followed.
func staysInside(dir, p string) error {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return err
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(realDir, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s: the symbolic link leads outside the folder %s: a served folder serves only the files inside it; copy the cartridge in, or serve its own folder too", p, dir)
	}
	return nil
}

// load parses a cartridge file and builds its bot; nil when the file is
// not a cartridge at all (prose without a yaml block, a YAML file with
// neither meta nor provider, such as a robopage).
func (c *Catalog) load(ctx context.Context, f File) *entry {
	e := &entry{Model: Model{ID: f.ID, Path: f.Path, Modified: f.Modified}, size: f.Size}
	if f.Err != nil {
		c.log.Warn("cartridge failed to load", "cartridge", f.ID, "error", f.Err.Error())
		e.Err = relative(f.Err, f.Dir)
		return e
	}
	if fi, err := os.Lstat(f.Path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// Checked again: the link may have changed since the scan.
		if err := staysInside(f.Dir, f.Path); err != nil {
			c.log.Warn("cartridge failed to load", "cartridge", f.ID, "error", err.Error())
			e.Err = relative(err, f.Dir)
			return e
		}
	}
	src, err := os.ReadFile(f.Path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		err = fmt.Errorf("%s: cannot read the cartridge: %w", f.Path, err)
		c.log.Warn("cartridge failed to load", "cartridge", f.ID, "error", err.Error())
		e.Err = relative(err, f.Dir)
		return e
	}
	format, err := cartridge.FormatOf(f.Path)
	if err == nil && format == cartridge.FormatMarkdown && !hasYAMLBlock(src) {
		c.log.Debug("not a cartridge: no yaml block", "path", f.Path)
		return nil
	}
	var cart *cartridge.Cartridge
	if err == nil {
		cart, err = cartridge.Parse(src, f.Path, format, c.opts.Lookup)
	}
	if err != nil {
		c.log.Warn("cartridge failed to load", "cartridge", f.ID, "error", err.Error())
		e.Err = relative(err, f.Dir)
		return e
	}
	if _, hasMeta := cart.Data["meta"]; !hasMeta {
		if _, hasProvider := cart.Data["provider"]; !hasProvider {
			c.log.Debug("not a cartridge: neither meta nor provider", "path", f.Path)
			return nil
		}
	}
	e.Cartridge = cart
	e.Bot, err = c.Build(ctx, f.ID, cart, c.opts.Host)
	if err != nil {
		c.log.Warn("cartridge failed to load", "cartridge", f.ID, "error", err.Error())
		e.Err = relative(err, f.Dir)
		return e
	}
	e.served = &served{bot: e.Bot, onClose: c.OnClose(f.ID)}
	return e
}

// OnClose is what the catalog does when the bot of the cartridge id
// closes: log a failure.
func (c *Catalog) OnClose(id string) func(error) {
	return func(err error) {
		if err != nil {
			c.log.Warn("closing a retired bot failed", "cartridge", id, "error", err.Error())
		}
	}
}

// Build is the package's Build with the warnings of the cartridge id
// logged by the catalog: for the catalog's own cartridges, and for the
// one-off bots of a front-end (a cartridge a client sent) built with
// another host.
func (c *Catalog) Build(ctx context.Context, id string, cart *cartridge.Cartridge, h bot.Host) (*bot.Bot, error) {
	h.Warn = func(msg string) { c.log.Warn("cartridge warning", "cartridge", id, "warning", msg) }
	h.Metrics.Cartridge = id
	return Build(ctx, cart, h)
}

func hasYAMLBlock(src []byte) bool {
	lower := bytes.ToLower(src)
	return bytes.Contains(lower, []byte("```yaml")) || bytes.Contains(lower, []byte("```yml"))
}

// loadDefault builds the built-in default cartridge ("-").
func (c *Catalog) loadDefault(ctx context.Context) {
	cart := cartridge.Default(c.opts.Lookup)
	e := &entry{Model: Model{ID: DefaultID, Cartridge: cart}}
	e.Bot, e.Err = c.Build(ctx, DefaultID, cart, c.opts.Host)
	if e.Err != nil {
		c.log.Warn("the default cartridge (-) cannot run", "error", e.Err.Error())
	} else {
		e.served = &served{bot: e.Bot, onClose: c.OnClose(DefaultID)}
	}
	c.def = e
}

// resolve finds the entry of id: "-" is a cartridge whose id is
// "default" (in any case) when there is one, else the built-in default.
func (c *Catalog) resolve(id string) *entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if id == DefaultID {
		if e := c.defaultOverride(); e != nil {
			return e
		}
		return c.def
	}
	return c.entries[id]
}

// defaultOverride is the cartridge whose id is "default" in any case.
// The caller holds mu.
func (c *Catalog) defaultOverride() *entry {
	if e, ok := c.entries["default"]; ok {
		return e
	}
	for id, e := range c.entries {
		if strings.EqualFold(id, "default") {
			return e
		}
	}
	return nil
}

// Models lists the cartridges allow lets through, sorted by id: the
// built-in default "-" (unless a cartridge with the id "default" takes
// its place), then every cartridge found in the folders, those that
// failed to load included (with Err set). Their bots are held by l; a
// bot l cannot hold (closed meanwhile) is listed without its Bot.
func (c *Catalog) Models(allow Filter, l *Leases) []Model {
	c.mu.RLock()
	var out []Model
	if c.defaultOverride() == nil && allow.allows(DefaultID) {
		out = append(out, c.def.Model)
		if c.def.served != nil {
			l.add(c.def.served)
		}
	}
	for id, e := range c.entries {
		if !allow.allows(id) {
			continue
		}
		m := e.Model
		if e.served != nil && !l.add(e.served) {
			m.Bot = nil
		}
		out = append(out, m)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Model returns what the catalog knows of the cartridge id, for
// listings: an *Error (NotFound, NotAllowed) when there is no such
// cartridge or allow refuses it. Unlike Bot, a cartridge that failed to
// load is no error.
func (c *Catalog) Model(id string, allow Filter) (Model, error) {
	e := c.resolve(id)
	if e == nil {
		return Model{}, &Error{Kind: NotFound, ID: id}
	}
	if !allow.allows(e.ID) {
		return Model{}, &Error{Kind: NotAllowed, ID: id}
	}
	return e.Model, nil
}

// Bot returns the model and the bot of the cartridge id ("-" is the
// default cartridge), held by l until it is released, so a cartridge
// changed on disk meanwhile never closes it under the exchange. Errors
// are *Error: NotFound, NotAllowed, Broken (a cartridge that failed to
// load, with why) and Reloading.
func (c *Catalog) Bot(id string, allow Filter, l *Leases) (Model, error) {
	for range 3 {
		if _, err := c.Model(id, allow); err != nil {
			return Model{}, err
		}
		e := c.resolve(id)
		if e == nil {
			continue // removed meanwhile
		}
		if e.Err != nil {
			return e.Model, &Error{Kind: Broken, ID: e.ID, Err: e.Err}
		}
		if l.add(e.served) {
			return e.Model, nil
		}
		// Retired and closed between the lookup and the hold: look again.
	}
	return Model{}, &Error{Kind: Reloading, ID: id}
}

// Close closes every bot that no lease holds, and the others when they
// are let go; the catalog is empty afterwards and Rescan does nothing.
func (c *Catalog) Close() error {
	c.mu.Lock()
	entries, def := c.entries, c.def
	c.entries, c.closed = map[string]*entry{}, true
	c.mu.Unlock()
	for _, e := range entries {
		if e.served != nil {
			e.served.retire()
		}
	}
	if def != nil && def.served != nil {
		def.served.retire()
	}
	return nil
}
