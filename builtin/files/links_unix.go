//go:build unix

package files

import (
	"io/fs"
	"syscall"
)

// linkCount is the number of hard links of a file; 1 when unknown.
func linkCount(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
