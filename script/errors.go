package script

import (
	"fmt"
	"time"
)

// CompileError reports source that does not compile. File and Line name
// the cartridge line of the error when the Source said where the code
// starts.
type CompileError struct {
	// Lang is the language of the source.
	Lang Lang
	// File is the cartridge file (Source.File), or a placeholder name.
	File string
	// Line is the line in File, 0 when unknown.
	Line int
	// Message is the compiler's message without the file and line.
	Message string
}

// Error implements error: "file:line: <lang> compile error: message".
func (e *CompileError) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	return fmt.Sprintf("%s: %s compile error: %s", where, e.Lang.title(), e.Message)
}

// RuntimeError is an error raised by a script while it ran. As in the
// reference, the caller turns it into the adapter's or tool's result.
type RuntimeError struct {
	// Lang is the language of the source.
	Lang Lang
	// Message is the error value as text, usually "file:line: message".
	Message string
}

// Error implements error; it returns the message as the script raised it.
func (e *RuntimeError) Error() string { return e.Message }

// LimitKind says which limit stopped a script.
type LimitKind string

// The limits a call can exceed.
const (
	LimitCPU      LimitKind = "cpu"
	LimitMemory   LimitKind = "memory"
	LimitTimeout  LimitKind = "timeout"
	LimitCanceled LimitKind = "canceled"
)

// LimitError reports a script stopped because it exceeded its CPU, memory
// or time limit, or because the caller's context was canceled.
type LimitError struct {
	// Lang is the language of the source.
	Lang Lang
	// Kind is the limit that was exceeded.
	Kind LimitKind
	// CPU and Memory are the limits in force (for the message).
	CPU, Memory uint64
	// After is how long the script ran (timeouts and cancellations).
	After time.Duration
}

// Error implements error with a message a user can act on.
func (e *LimitError) Error() string {
	lang := e.Lang.title()
	if e.Lang == Fennel {
		lang = "Fennel (Lua)"
	}
	switch e.Kind {
	case LimitCPU:
		return fmt.Sprintf("%s script stopped: CPU limit exceeded (%d units, about %s of work); look for a loop that never ends, or raise safety.functions.limits.cpu-seconds in the cartridge", lang, e.CPU, cpuDuration(e.CPU))
	case LimitMemory:
		return fmt.Sprintf("%s script stopped: memory limit exceeded (%s); build big strings with table.concat, or raise safety.functions.limits.memory (MiB) in the cartridge", lang, formatBytes(e.Memory))
	case LimitTimeout:
		return fmt.Sprintf("%s script stopped: timed out after %s; raise safety.functions.limits.timeout (seconds) in the cartridge if it needs longer", lang, e.After.Round(time.Millisecond))
	default:
		return fmt.Sprintf("%s script stopped: canceled after %s", lang, e.After.Round(time.Millisecond))
	}
}

// cpuDuration is a rough wall-clock equivalent of n golua CPU units.
func cpuDuration(n uint64) time.Duration {
	return (time.Duration(n) * time.Second / CPUUnitsPerSecond).Round(10 * time.Millisecond)
}

func formatBytes(n uint64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
