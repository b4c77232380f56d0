// Package bytesize writes byte counts for people, in the units nb's
// flags and limits use: "64 MiB", "512 KiB", "1000 bytes".
package bytesize

import "strconv"

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
