package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Enumerator is a store that can say everything it holds, for moving
// conversations between stores (nb state export): its bots, and each
// conversation's kept outputs.
type Enumerator interface {
	// Bots lists the bots with stored conversations, as the slugs of
	// BotPath (which open the same conversations again).
	Bots(ctx context.Context) ([]Bot, error)
}

// OutputLister is a conversation whose kept outputs can be listed.
type OutputLister interface {
	// Outputs lists the names (OutputName) of the kept outputs: Output
	// reads each by its name.
	Outputs(ctx context.Context) ([]string, error)
}

// Backdater is a conversation whose time of last activity can be set:
// an import keeps the exported one.
type Backdater interface {
	// SetLastActivity sets it; the conversation must be stored.
	SetLastActivity(ctx context.Context, at time.Time) error
}

// BotFromPath reads a BotPath back into the bot of its slugs.
func BotFromPath(path string) (Bot, error) {
	parts := strings.Split(path, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return Bot{}, fmt.Errorf("%q is not a bot's author/name/version", path)
	}
	return Bot{Author: parts[0], Name: parts[1], Version: parts[2]}, nil
}

var (
	_ Enumerator   = Files{}
	_ OutputLister = (*fileConversation)(nil)
	_ Backdater    = (*fileConversation)(nil)
)

// SetLastActivity sets the state file's modification time.
func (s *fileConversation) SetLastActivity(_ context.Context, at time.Time) error {
	if err := os.Chtimes(s.file(), at, at); err != nil {
		return fmt.Errorf("set the time of %s: %w", s.file(), err)
	}
	return nil
}

// Bots lists the cartridge folders under the root that hold
// conversations.
func (p Files) Bots(context.Context) ([]Bot, error) {
	base := filepath.Join(p.Root, Implementation)
	authors, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the states in %s: %w", base, err)
	}
	var out []Bot
	for _, a := range authors {
		names, _ := os.ReadDir(filepath.Join(base, a.Name()))
		for _, n := range names {
			dir := filepath.Join(base, a.Name(), n.Name())
			versions, _ := os.ReadDir(dir)
			unversioned := false
			for _, v := range versions {
				b := Bot{Author: a.Name(), Name: n.Name(), Version: v.Name()}
				if !v.IsDir() || Slug(b.Author) != b.Author || Slug(b.Name) != b.Name || b.Author == "" || b.Name == "" {
					continue // not a folder of nb's
				}
				// A cartridge without a version keeps its end users'
				// folders here: theirs hold the keys' state files.
				if found, _ := filepath.Glob(filepath.Join(dir, v.Name(), "*", FileName)); len(found) > 0 {
					if !unversioned {
						out = append(out, Bot{Author: b.Author, Name: b.Name})
						unversioned = true
					}
					continue
				}
				if Slug(b.Version) == b.Version {
					out = append(out, b)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Author+"/"+out[i].Name+"/"+out[i].Version < out[j].Author+"/"+out[j].Name+"/"+out[j].Version
	})
	return out, nil
}

// Outputs lists the kept outputs' names.
func (s *fileConversation) Outputs(context.Context) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, outputsName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list kept outputs: %w", err)
	}
	var out []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".txt"); ok && !e.IsDir() {
			out = append(out, n)
		}
	}
	return out, nil
}
