// Package script runs the small programs a cartridge carries: adapters
// and tools written in Lua 5.4 (embedded, pure Go), Fennel (compiled to
// Lua by script/fennel) and Clojure (through Babashka, unsandboxed only).
//
// A Runtime serves one cartridge. Each call gets a fresh global
// environment, and a sandboxed call sees only string, table, math, utf8
// and the safe base functions. Every call runs under a CPU, memory and
// time limit (Limits; a cartridge sets them under
// safety.functions.limits); a script that exceeds one stops with a
// LimitError and the Runtime stays usable. No script can take the process
// down: recursion through metamethods and callbacks, and the nesting of
// sources, are bounded (package script/internal/guard), the memory limit
// bounds real memory, and what a script prints or starts belongs to its
// call (WithOutput; children run through package proc and die with the
// call). docs/scripts.md is the user's guide.
package script
