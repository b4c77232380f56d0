package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nbots/nb/internal/atomicfile"
)

// JournalFile is the run folder's checkpoint journal: every checkpoint
// saved, one JSON line each, appended and synced. It is what makes a
// checkpoint durable with one write and one fdatasync a node, where
// checkpoint.json alone would cost a temporary file, two fsyncs (the
// file's and the folder's) and a rename; checkpoint.json is still
// replaced whole at each save (atomic against a killed process, the
// specification's layout), and made durable itself when the journal is
// compacted. LoadCheckpoint takes the newer of the two.
const JournalFile = "checkpoint.journal"

// journalMax is the size past which the journal is compacted:
// checkpoint.json is written durably (fsync, rename, fsync of the
// folder) and the journal emptied.
var journalMax int64 = 4 << 20

// journal is a run's checkpoint journal, open for appending.
type journal struct {
	dir  string
	f    *os.File
	size int64
}

// save makes data (a checkpoint, marshalled) the run's checkpoint.
func (j *journal) save(data []byte) error {
	path := filepath.Join(j.dir, CheckpointFile)
	if j.f == nil {
		if err := j.open(); err != nil {
			return err
		}
	}
	if j.size+int64(len(data)) > journalMax {
		// Compact: checkpoint.json durable, then the journal emptied.
		if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		if err := j.f.Truncate(0); err != nil {
			return fmt.Errorf("save checkpoint: %s: %w", j.f.Name(), err)
		}
		j.size = 0
		return nil
	}
	// checkpoint.json first, not synced: whole after a kill (a rename),
	// and the journal line below is what survives a power cut.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	line := make([]byte, 0, len(data)+1)
	line = append(append(line, data...), '\n')
	if _, err := j.f.Write(line); err != nil {
		return fmt.Errorf("save checkpoint: %s: %w", j.f.Name(), err)
	}
	if err := fdatasync(j.f); err != nil {
		return fmt.Errorf("save checkpoint: %s: %w", j.f.Name(), err)
	}
	j.size += int64(len(line))
	return nil
}

// open opens the journal for appending: a new one is made durable in
// its folder once; one whose last line was cut (a power cut in a write)
// gets its line ended, so the next one parses.
func (j *journal) open() error {
	path := filepath.Join(j.dir, JournalFile)
	_, err := os.Stat(path)
	created := errors.Is(err, fs.ErrNotExist)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("save checkpoint: %w", err)
	}
	j.f, j.size = f, st.Size()
	if j.size > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, j.size-1); err == nil && last[0] != '\n' {
			if _, err := f.Write([]byte{'\n'}); err != nil {
				return fmt.Errorf("save checkpoint: %w", err)
			}
			j.size++
		}
	}
	if created {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("save checkpoint: %w", err)
		}
		atomicfile.SyncDir(j.dir)
	}
	return nil
}

func (j *journal) close() {
	if j != nil && j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// lastJournaled is the last checkpoint of dir's journal that parses
// (nil when none does).
func lastJournaled(dir string) *Checkpoint {
	data, err := os.ReadFile(filepath.Join(dir, JournalFile))
	if err != nil {
		return nil
	}
	lines := bytes.Split(data, []byte{'\n'})
	for i := len(lines) - 1; i >= 0; i-- {
		if len(lines[i]) == 0 {
			continue
		}
		if cp, err := ParseCheckpoint(filepath.Join(dir, JournalFile), lines[i]); err == nil {
			return cp
		}
	}
	return nil
}
