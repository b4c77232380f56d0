// Package bytesize reads and writes byte counts for people, in the units
// nb's flags and limits use: "64 MiB", "512 KiB", "1000 bytes".
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads 4194304, 512KiB or 4MiB (KB and MB too, as powers of 2;
// a space before the unit is fine). The size must be positive.
func Parse(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<63-1)/mult {
		return 0, fmt.Errorf("%q is not a size: write bytes, or a number with KiB or MiB (4MiB)", s)
	}
	return n * mult, nil
}

// String writes n in MiB or KiB when it is a whole number of them, else
// in bytes.
func String(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
