package fennel

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Version identifies the compiler's output; it is part of every cache key,
// so bump it whenever the Lua produced for some source changes.
const Version = "nb-fennel-3"

// maxMemEntries bounds the memory cache; cartridges hold few adapters, so
// reaching it means sources are generated, and starting over is fine.
const maxMemEntries = 4096

// Cache compiles through a memory cache and, when it has a directory, a
// disk cache shared by runs. The zero value is not usable; use NewCache.
type Cache struct {
	dir string
	mu  sync.Mutex
	mem map[string]string
}

// NewCache returns a cache that keeps chunks in memory and, unless dir is
// "", in files under dir (created when needed).
func NewCache(dir string) *Cache {
	return &Cache{dir: dir, mem: map[string]string{}}
}

// DefaultCacheDir is $XDG_CACHE_HOME/nano-bots/fennel, or
// ~/.cache/nano-bots/fennel when XDG_CACHE_HOME is not set, with the
// variables getenv gives (the caller's environment, not necessarily the
// process's).
func DefaultCacheDir(getenv func(string) string) (string, error) {
	// The XDG specification says a relative path is to be ignored.
	if d := getenv("XDG_CACHE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "nano-bots", "fennel"), nil
	}
	home := getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		return "", fmt.Errorf("fennel cache directory: neither XDG_CACHE_HOME nor HOME is an absolute path")
	}
	return filepath.Join(home, ".cache", "nano-bots", "fennel"), nil
}

// cacheKey hashes the compiler version, the options and the source.
func cacheKey(src string, opts Options) string {
	h := sha256.New()
	var sb strings.Builder
	sb.WriteString(Version)
	sb.WriteByte(0)
	sb.WriteString(opts.Filename)
	sb.WriteByte(0)
	sb.WriteString(strconv.Itoa(opts.Line) + ":" + strconv.Itoa(opts.Column) + ":" + strconv.FormatBool(opts.Sandboxed))
	sb.WriteByte(0)
	sb.WriteString(strconv.FormatBool(opts.Params != nil))
	for _, p := range opts.Params {
		sb.WriteByte(0)
		sb.WriteString(strconv.Quote(p))
	}
	sb.WriteByte(0)
	h.Write([]byte(sb.String()))
	h.Write([]byte(src))
	return hex.EncodeToString(h.Sum(nil))
}

// Compile is like the package's Compile, but reuses earlier results.
// Compile errors are not cached.
func (c *Cache) Compile(src string, opts Options) (string, error) {
	key := cacheKey(src, opts)
	c.mu.Lock()
	lua, ok := c.mem[key]
	c.mu.Unlock()
	if ok {
		return lua, nil
	}
	if lua, ok := c.readDisk(key); ok {
		c.remember(key, lua)
		return lua, nil
	}
	lua, err := Compile(src, opts)
	if err != nil {
		return "", err
	}
	c.remember(key, lua)
	// The disk cache only saves time: failing to write it is not an error.
	_ = c.writeDisk(key, lua)
	return lua, nil
}

func (c *Cache) remember(key, lua string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mem) >= maxMemEntries {
		c.mem = map[string]string{}
	}
	c.mem[key] = lua
}

// A cache file is a header naming the version, the key and the body's
// sha256, then the Lua chunk. Anything else is ignored as corrupt.
func header(key, lua string) string {
	sum := sha256.Sum256([]byte(lua))
	return "-- " + Version + " " + key + " " + hex.EncodeToString(sum[:]) + "\n"
}

func (c *Cache) path(key string) string { return filepath.Join(c.dir, key+".lua") }

func (c *Cache) readDisk(key string) (string, bool) {
	if c.dir == "" {
		return "", false
	}
	data, err := os.ReadFile(c.path(key))
	if err != nil {
		return "", false
	}
	head, lua, ok := strings.Cut(string(data), "\n")
	if !ok || head+"\n" != header(key, lua) {
		return "", false
	}
	return lua, true
}

func (c *Cache) writeDisk(key, lua string) error {
	if c.dir == "" {
		return nil
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(c.dir, key+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := f.WriteString(header(key, lua) + lua)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), c.path(key)); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
