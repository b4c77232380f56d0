package project

import (
	"bufio"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// systemVersion is osVersion, read once a process: the system does not
// change under it, and the environment block is written every exchange.
var systemVersion = sync.OnceValue(osVersion)

// osVersion names the operating system's version: the distribution's
// name (os-release's PRETTY_NAME) and the kernel's release on Linux, the
// system's name and release elsewhere; "" when neither can be read.
func osVersion() string {
	var u unix.Utsname
	kernel, sys := "", ""
	if unix.Uname(&u) == nil {
		kernel, sys = unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Sysname[:])
	}
	if name := osRelease("/etc/os-release"); name != "" {
		if kernel != "" {
			return name + ", kernel " + kernel
		}
		return name
	}
	return strings.TrimSpace(sys + " " + kernel)
}

// osRelease reads PRETTY_NAME from an os-release file.
func osRelease(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return ""
}
