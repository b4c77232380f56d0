package startpages

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// dropExecutable calls madvise(MADV_DONTNEED) on the read-only mappings
// of /proc/self/exe (its code and read-only data). They are private and
// never written, so the kernel maps them again from the file when used;
// writable mappings (data, bss, heap) are left alone.
func dropExecutable() int64 {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0
	}
	defer f.Close()
	var dropped int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 00400000-0105a000 r-xp 00000000 08:01 1234 /path/to/nb
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		// The range is not Go memory: madvise is called on its addresses.
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), syscall.MADV_DONTNEED); errno == 0 {
			dropped += int64(end - start)
		}
	}
	return dropped
}
