// Package startpages gives back the memory a long-running process touched
// only while it started.
//
// Starting nb runs the initialisation of every package the binary links
// (about 260), whether the command needs them or not. Their code is
// spread over the whole binary and the kernel maps a file 64 KiB around
// each page touched, so a process that has just started holds most of the
// binary's code and tables in its resident set (about 20 MiB), although
// an idle gateway runs a small part of it. Release drops the process's
// mappings of the binary's read-only pages, which are never written and
// come back from the page cache on the next use, and returns the heap
// freed since start to the system.
package startpages

import "runtime/debug"

// Release gives back the pages touched while starting: the read-only
// mappings of the executable (Linux; elsewhere nothing) and the free heap.
// It returns the bytes of the executable's mappings it dropped. Call it
// once the process is serving and idle: it costs about a millisecond
// and page faults for the code that runs next.
func Release() int64 {
	debug.FreeOSMemory() // first: the collection runs code and reads tables
	return dropExecutable()
}
