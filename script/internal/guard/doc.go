// Package guard keeps Lua code run by golua from taking down the process:
// golua recurses on the Go stack without bound in its parser and compiler
// and whenever it calls Lua from Go (metamethods, pcall, sort comparators,
// gsub callbacks), and a Go stack overflow is a fatal error that no
// recover catches. CheckNesting refuses sources nested too deeply before
// golua parses them; Install bounds the calls into Lua from Go of a thread
// to MaxCallDepth, stopping the script with a "stack overflow" error as C
// Lua does. It also corrects golua's memory accounting (Setmetatable,
// MemoryScale).
package guard
