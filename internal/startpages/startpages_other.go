//go:build !linux

package startpages

func dropExecutable() int64 { return 0 }
