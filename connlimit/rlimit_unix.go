//go:build unix

package connlimit

import "syscall"

// MaxConnsForFiles is half the process's limit of open files: the rest
// stays for cartridges, provider connections and tool processes.
func MaxConnsForFiles() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur == 0 || l.Cur > 1<<30 {
		return 1 << 30
	}
	return max(int(l.Cur/2), 16)
}
