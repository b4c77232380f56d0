package cartridge

import (
	"os"
	"path/filepath"
	"strings"
)

// Extensions are tried, in this order, after a name given without one.
var Extensions = []string{".yml", ".yaml", ".markdown", ".mdown", ".mkdn", ".md"}

// Env is the part of the environment cartridge lookup reads; tests fill
// it by hand.
type Env struct {
	// CartridgesPath is NANO_BOTS_CARTRIDGES_PATH (colon-separated).
	CartridgesPath string
	// CartridgesDirectory is the legacy NANO_BOTS_CARTRIDGES_DIRECTORY.
	CartridgesDirectory string
	// DataHome is XDG_DATA_HOME; Home is HOME.
	DataHome, Home string
}

// DefaultDirectory is where cartridges live when no variable says
// otherwise: $XDG_DATA_HOME/nano-bots/cartridges, else
// ~/.local/share/nano-bots/cartridges.
func (e Env) DefaultDirectory() string {
	if e.DataHome != "" && filepath.IsAbs(e.DataHome) {
		return filepath.Join(e.DataHome, "nano-bots", "cartridges")
	}
	return filepath.Join(e.Home, ".local", "share", "nano-bots", "cartridges")
}

// Directories lists the cartridge directories in lookup order: those of
// NANO_BOTS_CARTRIDGES_PATH, then of the legacy variable, then the default.
func (e Env) Directories() []string {
	var dirs []string
	for _, list := range []string{e.CartridgesPath, e.CartridgesDirectory} {
		for _, d := range strings.Split(list, ":") {
			if d = strings.TrimSpace(d); d != "" {
				if d != "/" {
					d = strings.TrimSuffix(d, "/")
				}
				dirs = append(dirs, d)
			}
		}
	}
	return append(dirs, e.DefaultDirectory())
}

// Candidates lists, in order, every path Find tries for name: the name
// as given, the name with each extension, then each directory's
// name and name.<ext>. Unlike the reference, the extension is stripped
// once, not again in every directory, and an absolute name is not looked
// up under the directories.
func Candidates(name string, env Env) []string {
	partial := strings.TrimSuffix(name, filepath.Ext(name))
	candidates := []string{name}
	for _, ext := range Extensions {
		candidates = append(candidates, partial+ext)
	}
	if filepath.IsAbs(name) {
		return dedupe(candidates)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(partial, "./"), "/")
	relName := strings.TrimPrefix(strings.TrimPrefix(name, "./"), "/")
	for _, dir := range env.Directories() {
		candidates = append(candidates, filepath.Join(dir, relName))
		if relName != rel {
			candidates = append(candidates, filepath.Join(dir, rel))
		}
		for _, ext := range Extensions {
			candidates = append(candidates, filepath.Join(dir, rel+ext))
		}
	}
	return dedupe(candidates)
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	out := list[:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// NotFoundError lists every path tried for a cartridge.
type NotFoundError struct {
	Name  string
	Tried []string
}

func (e *NotFoundError) Error() string {
	return "cartridge not found: " + e.Name + "\ntried:\n  " + strings.Join(e.Tried, "\n  ") +
		"\nset NANO_BOTS_CARTRIDGES_PATH to the folders that hold your cartridges, or give the file's path"
}

// Find resolves a cartridge name to the first candidate that is a
// regular file. The name as given may also be anything else readable but
// a folder (a named pipe, /dev/stdin, a process substitution such as
// /dev/fd/63): Load reads it once.
func Find(name string, env Env) (string, error) {
	tried := Candidates(name, env)
	if fi, err := os.Stat(name); err == nil && !fi.IsDir() {
		return name, nil
	}
	for _, p := range tried {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", &NotFoundError{Name: name, Tried: tried}
}
