package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nbots/nb/internal/atomicfile"
)

// StatusFile is what a running gateway says of its channels, in a file
// of its state folder that nb gateway channels status reads: the file is
// rewritten when a channel's state changes, and its lock is held while
// the gateway runs.
type StatusFile struct {
	PID      int            `json:"pid"`
	Started  time.Time      `json:"started"`
	Updated  time.Time      `json:"updated"`
	Channels []ChannelState `json:"channels"`
}

// statusEvery is how often KeepStatus looks for changes.
const statusEvery = time.Second

// KeepStatus writes the channels' states to path whenever they change,
// until ctx ends; then it removes the file. It holds path's lock
// (path.lock) meanwhile, so ReadStatus tells a running gateway from a
// file a crash left. Another gateway of the same workspace and state
// folder (a replica on this machine) keeps the file: this one writes
// none and KeepStatus returns nil.
func (g *Gateway) KeepStatus(ctx context.Context, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("channel status: %w", err)
	}
	unlock, err := atomicfile.TryLock(path + ".lock")
	if errors.Is(err, atomicfile.ErrLocked) {
		g.log().Info("another gateway of this workspace writes the channel status", "file", path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("channel status: %w", err)
	}
	defer unlock()
	defer os.Remove(path) //nolint:errcheck // a file left is told apart by its lock
	f := StatusFile{PID: os.Getpid(), Started: time.Now()}
	t := time.NewTicker(statusEvery)
	defer t.Stop()
	var last []ChannelState
	for {
		now := g.Channels()
		if last == nil || !slices.Equal(now, last) {
			f.Updated, f.Channels = time.Now(), now
			b, _ := json.MarshalIndent(f, "", "  ")
			if err := atomicfile.WriteFile(path, append(b, '\n'), 0o600); err != nil {
				g.log().Warn("channel status not written", "error", err)
			} else {
				last = now
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ReadStatus reads the status file a gateway keeps at path: running
// tells whether that gateway runs now (it holds the file's lock). A
// gateway that is not running has no file, or an old one a crash left,
// which is returned with running false.
func ReadStatus(path string) (f StatusFile, running bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, false, nil
	}
	if err != nil {
		return f, false, fmt.Errorf("channel status: %w", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, false, fmt.Errorf("channel status %s: unreadable: %v", path, err)
	}
	unlock, err := atomicfile.TryLock(path + ".lock")
	if err != nil {
		return f, errors.Is(err, atomicfile.ErrLocked), nil
	}
	unlock()
	return f, false, nil
}

// ChannelReport writes the channels' states for nb gateway status and nb
// gateway channels status: the running gateway's, from its status file
// at path, else the configured channels' (configured: enabled by name),
// as the gateway is not running.
func ChannelReport(w io.Writer, path string, configured map[string]bool) error {
	f, running, err := ReadStatus(path)
	if err != nil {
		return err
	}
	if !running {
		fmt.Fprintln(w, "Channels: the gateway is not running")
		for _, name := range slices.Sorted(maps.Keys(configured)) {
			state := "not running"
			if !configured[name] {
				state = "disabled"
			}
			fmt.Fprintf(w, "  %-10s %s\n", name, state)
		}
		return nil
	}
	fmt.Fprintf(w, "Channels: the gateway runs (pid %d, since %s)\n", f.PID, f.Started.Local().Format(time.DateTime))
	for _, st := range f.Channels {
		line := st.String()
		if !st.Since.IsZero() && st.State != "disabled" {
			line += " (since " + st.Since.Local().Format(time.DateTime) + ")"
		}
		fmt.Fprintf(w, "  %-10s %s\n", st.Name, line)
	}
	return nil
}
