//go:build !unix

package connlimit

// MaxConnsForFiles does not bound connections where there is no limit of
// open files to read.
func MaxConnsForFiles() int { return 1 << 30 }
