// Package fennel compiles Fennel, the Lisp that cartridges may use for
// adapters and tools, into Lua 5.4 for nb's Lua runtime, in Go: no Lua
// compiler to load at each run. User macros (macro, macros) run at compile
// time in a sandboxed golua runtime. It also provides the `fennel` runtime
// table (fennel.view) and a memory and disk cache of compiled chunks.
package fennel
