package cron

import (
	"io/fs"
	"syscall"
)

// inode is the file's inode number: an atomic rename changes it even when
// size and modification time look the same.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
