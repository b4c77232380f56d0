package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
)

// DefaultID is the id of the built-in default cartridge.
const DefaultID = "-"

// Model is one cartridge the server serves: its id (the path relative to
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

// entry is a served cartridge.
type entry struct {
	Model
	size   int64
	served *served // nil when the bot could not be built
}

// scanned is a cartridge file found in the folders.
type scanned struct {
	id, path, dir string
	mod           time.Time
	size          int64
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
// and (re)builds their bots; the watcher calls it every WatchInterval.
// A cartridge that fails to load is logged once per change and listed
// with its error; it never stops the others.
func (s *Server) Rescan(ctx context.Context) {
	s.scanMu.Lock()
	defer s.scanMu.Unlock()
	found := s.scan()
	s.catMu.RLock()
	old := s.entries
	s.catMu.RUnlock()

	next := make(map[string]*entry, len(found))
	var retired []*served
	for _, f := range found {
		if e, ok := old[f.id]; ok && e.Path == f.path && e.Modified.Equal(f.mod) && e.size == f.size {
			next[f.id] = e
			continue
		}
		e := s.load(ctx, f)
		if e == nil {
			if prev, ok := old[f.id]; ok && prev.served != nil {
				retired = append(retired, prev.served)
			}
			continue
		}
		next[f.id] = e
		if prev, ok := old[f.id]; ok && prev.served != nil {
			retired = append(retired, prev.served)
		}
		if _, existed := old[f.id]; existed {
			s.log.Info("cartridge reloaded", "cartridge", f.id, "path", f.path, "ok", e.Err == nil)
		} else if s.scanned {
			s.log.Info("cartridge added", "cartridge", f.id, "path", f.path, "ok", e.Err == nil)
		}
	}
	for id, e := range old {
		if _, ok := next[id]; ok {
			continue
		}
		if e.served != nil && !slices.Contains(retired, e.served) {
			retired = append(retired, e.served)
		}
		s.log.Info("cartridge removed", "cartridge", id, "path", e.Path)
	}
	s.catMu.Lock()
	s.entries = next
	s.catMu.Unlock()
	s.scanned = true
	for _, b := range retired {
		b.retire()
	}
}

// scan lists the cartridge files of the folders: ids in folder order, the
// first folder (then the first extension) that has an id wins.
func (s *Server) scan() []scanned {
	var out []scanned
	seen := map[string]bool{}
	for _, dir := range s.dirs {
		var files []scanned
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
			if d.IsDir() {
				return nil
			}
			ext := strings.ToLower(filepath.Ext(name))
			if !slices.Contains(cartridge.Extensions, ext) {
				return nil
			}
			info, err := os.Stat(p) // follows a symlinked file
			if err != nil || !info.Mode().IsRegular() {
				return nil
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return nil
			}
			id := filepath.ToSlash(strings.TrimSuffix(rel, filepath.Ext(rel)))
			files = append(files, scanned{id: id, path: p, dir: dir, mod: info.ModTime(), size: info.Size()})
			return nil
		})
		// Within a folder, the extension order of name lookup decides.
		sort.SliceStable(files, func(i, j int) bool {
			if files[i].id != files[j].id {
				return files[i].id < files[j].id
			}
			return extRank(files[i].path) < extRank(files[j].path)
		})
		for _, f := range files {
			if seen[f.id] || f.id == DefaultID {
				continue
			}
			seen[f.id] = true
			out = append(out, f)
		}
	}
	return out
}

func extRank(p string) int {
	return slices.Index(cartridge.Extensions, strings.ToLower(filepath.Ext(p)))
}

// load parses a cartridge file and builds its bot; nil when the file is
// not a cartridge at all (prose without a yaml block, a YAML file with
// neither meta nor provider, such as a robopage).
func (s *Server) load(ctx context.Context, f scanned) *entry {
	e := &entry{Model: Model{ID: f.id, Path: f.path, Modified: f.mod}, size: f.size}
	src, err := os.ReadFile(f.path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		err = fmt.Errorf("%s: cannot read the cartridge: %w", f.path, err)
		s.log.Warn("cartridge failed to load", "cartridge", f.id, "error", err.Error())
		e.Err = relative(err, f.dir)
		return e
	}
	format, err := cartridge.FormatOf(f.path)
	if err == nil && format == cartridge.FormatMarkdown && !hasYAMLBlock(src) {
		s.log.Debug("not a cartridge: no yaml block", "path", f.path)
		return nil
	}
	var c *cartridge.Cartridge
	if err == nil {
		c, err = cartridge.Parse(src, f.path, format, s.lookup)
	}
	if err != nil {
		s.log.Warn("cartridge failed to load", "cartridge", f.id, "error", err.Error())
		e.Err = relative(err, f.dir)
		return e
	}
	if _, hasMeta := c.Data["meta"]; !hasMeta {
		if _, hasProvider := c.Data["provider"]; !hasProvider {
			s.log.Debug("not a cartridge: neither meta nor provider", "path", f.path)
			return nil
		}
	}
	e.Cartridge = c
	for _, w := range c.Warnings {
		s.log.Warn("cartridge warning", "cartridge", f.id, "warning", w)
	}
	e.Bot, err = s.build(ctx, f.id, c, s.host)
	if err != nil {
		s.log.Warn("cartridge failed to load", "cartridge", f.id, "error", err.Error())
		e.Err = relative(err, f.dir)
		return e
	}
	e.served = s.newServed(f.id, e.Bot)
	return e
}

func (s *Server) newServed(id string, b *bot.Bot) *served {
	return &served{bot: b, onClose: func(err error) {
		if err != nil {
			s.log.Warn("closing a retired bot failed", "cartridge", id, "error", err.Error())
		}
	}}
}

// build makes the bot of a loaded cartridge, with a panic in the
// runtime's constructors contained as the cartridge's error.
func (s *Server) build(ctx context.Context, id string, c *cartridge.Cartridge, h bot.Host) (b *bot.Bot, err error) {
	defer func() {
		if p := recover(); p != nil {
			b, err = nil, &bot.PanicError{Value: p}
		}
	}()
	h.Warn = func(msg string) { s.log.Warn("cartridge warning", "cartridge", id, "warning", msg) }
	b, err = bot.New(ctx, c, h)
	if err == nil {
		err = b.Ready(cartridge.Eval)
		if err == nil {
			err = b.Ready(cartridge.REPL)
		}
		if err != nil {
			b.Close() //nolint:errcheck // the error that matters is err
			b = nil
		}
	}
	return b, err
}

func hasYAMLBlock(src []byte) bool {
	lower := bytes.ToLower(src)
	return bytes.Contains(lower, []byte("```yaml")) || bytes.Contains(lower, []byte("```yml"))
}

// loadDefault builds the built-in default cartridge ("-").
func (s *Server) loadDefault(ctx context.Context) {
	c := cartridge.Default(s.lookup)
	e := &entry{Model: Model{ID: DefaultID, Cartridge: c}}
	e.Bot, e.Err = s.build(ctx, DefaultID, c, s.host)
	if e.Err != nil {
		s.log.Warn("the default cartridge (-) cannot run", "error", e.Err.Error())
	} else {
		e.served = s.newServed(DefaultID, e.Bot)
	}
	s.def = e
}

// resolve finds the entry of id: "-" is a cartridge whose id is
// "default" (in any case) when there is one, else the built-in default.
func (s *Server) resolve(id string) *entry {
	s.catMu.RLock()
	defer s.catMu.RUnlock()
	if id == DefaultID {
		if e := s.defaultOverride(); e != nil {
			return e
		}
		return s.def
	}
	return s.entries[id]
}

// defaultOverride is the cartridge whose id is "default" in any case.
// The caller holds catMu.
func (s *Server) defaultOverride() *entry {
	if e, ok := s.entries["default"]; ok {
		return e
	}
	for id, e := range s.entries {
		if strings.EqualFold(id, "default") {
			return e
		}
	}
	return nil
}

// Models lists the cartridges the request's token may use, sorted by id:
// the built-in default "-" (unless a cartridge with the id "default"
// takes its place), then every cartridge found in the folders, those that
// failed to load included (with Err set). The bots of the list are held
// until the request ends.
func (s *Server) Models(ctx context.Context) []Model {
	tok := TokenFrom(ctx)
	l := leasesFrom(ctx)
	s.catMu.RLock()
	var out []Model
	if s.defaultOverride() == nil && tok.Allows(DefaultID) {
		out = append(out, s.def.Model)
		if s.def.served != nil {
			l.add(s.def.served)
		}
	}
	for id, e := range s.entries {
		if !tok.Allows(id) {
			continue
		}
		m := e.Model
		if e.served != nil && !l.add(e.served) {
			m.Bot = nil
		}
		out = append(out, m)
	}
	s.catMu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Model returns what the server knows of the cartridge id, for listings:
// 404 when there is no such cartridge, 403 when the request's token may
// not use it. Unlike Bot, a cartridge that failed to load is no error.
func (s *Server) Model(ctx context.Context, id string) (Model, error) {
	e := s.resolve(id)
	if e == nil {
		return Model{}, &Error{Status: http.StatusNotFound, Code: "model_not_found",
			Message: fmt.Sprintf("there is no cartridge %q on this server: GET /cartridges (or /v1/models) lists them", id)}
	}
	if !TokenFrom(ctx).Allows(e.ID) {
		return Model{}, &Error{Status: http.StatusForbidden, Code: "model_not_allowed",
			Message: fmt.Sprintf("this token may not use the cartridge %q", id)}
	}
	return e.Model, nil
}

// Bot returns the bot of the cartridge id ("-" is the default cartridge),
// held until the request (or the run started with Admit) ends, so a
// cartridge changed on disk meanwhile never closes it under the exchange.
// Its errors are *Error: 404 for an unknown id, 403 when the request's
// token may not use it, 500 when the cartridge failed to load (with why).
func (s *Server) Bot(ctx context.Context, id string) (*bot.Bot, error) {
	for range 3 {
		if _, err := s.Model(ctx, id); err != nil {
			return nil, err
		}
		e := s.resolve(id)
		if e == nil {
			continue // removed meanwhile
		}
		if e.Err != nil {
			return nil, &Error{Status: http.StatusInternalServerError, Err: e.Err,
				Message: fmt.Sprintf("the cartridge %q failed to load: %v", e.ID, e.Err)}
		}
		if setCartridge(ctx, e.ID); leasesFrom(ctx).add(e.served) {
			return e.Bot, nil
		}
		// Retired and closed between the lookup and the hold: look again.
	}
	return nil, &Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("the cartridge %q is being reloaded: try again", id)}
}

// loggerOr returns l, or a logger that drops everything.
func loggerOr(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
