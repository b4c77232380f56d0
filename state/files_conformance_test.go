package state_test

import (
	"os"
	"testing"

	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/storetest"
)

// TestFilesConformance runs the store conformance suite on the files.
func TestFilesConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) func(string) state.Store {
			root := memoryDir(t)
			return func(password string) state.Store {
				f := state.Files{Root: root}
				if password != "" {
					f.Cipher = state.NewCipher(password)
				}
				return f
			}
		},
		Crash: func(t *testing.T, turn state.Turn, events []state.Event) {
			if err := state.CrashTurn(turn, events); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// memoryDir is a temporary folder in memory (/dev/shm) when there is one:
// the suite writes ten thousand conversations, and the disk's syncs would
// make it take minutes. The code run is the same.
func memoryDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "nb-storetest-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}
