//go:build !unix

package server

// maxConnsForFiles does not bound connections where there is no limit of
// open files to read.
func maxConnsForFiles() int { return 1 << 30 }
