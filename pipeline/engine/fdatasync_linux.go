package engine

import (
	"os"
	"syscall"
)

// fdatasync syncs f's data (and the size that reads it), not its times.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
