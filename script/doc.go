// Package script runs the small programs a cartridge carries: adapters
// and tools written in Lua 5.4 (embedded, pure Go), Fennel (compiled to
// Lua by script/fennel) and Clojure (through Babashka, unsandboxed only).
//
// A Runtime serves one cartridge. Each call gets a fresh global
// environment, and a sandboxed call sees only string, table, math, utf8
// and the safe base functions, under a CPU, memory and time
// limit; a script that exceeds one stops with a LimitError and the
// Runtime stays usable.
package script
