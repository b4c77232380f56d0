//go:build unix

package robopage

import (
	"fmt"
	"os"
	"syscall"
)

// exitText is the exit status as Rust prints it: "exit status: 1",
// "signal: 9 (SIGKILL)", with " (core dumped)" when a core was dumped.
func exitText(state *os.ProcessState) string {
	ws, ok := state.Sys().(syscall.WaitStatus)
	if !ok {
		return state.String()
	}
	if ws.Signaled() {
		sig := int(ws.Signal())
		s := fmt.Sprintf("signal: %d", sig)
		if name, ok := signalNames[sig]; ok {
			s += " (" + name + ")"
		}
		if ws.CoreDump() {
			s += " (core dumped)"
		}
		return s
	}
	return fmt.Sprintf("exit status: %d", ws.ExitStatus())
}

var signalNames = map[int]string{
	int(syscall.SIGHUP): "SIGHUP", int(syscall.SIGINT): "SIGINT", int(syscall.SIGQUIT): "SIGQUIT",
	int(syscall.SIGILL): "SIGILL", int(syscall.SIGTRAP): "SIGTRAP", int(syscall.SIGABRT): "SIGABRT",
	int(syscall.SIGBUS): "SIGBUS", int(syscall.SIGFPE): "SIGFPE", int(syscall.SIGKILL): "SIGKILL",
	int(syscall.SIGUSR1): "SIGUSR1", int(syscall.SIGSEGV): "SIGSEGV", int(syscall.SIGUSR2): "SIGUSR2",
	int(syscall.SIGPIPE): "SIGPIPE", int(syscall.SIGALRM): "SIGALRM", int(syscall.SIGTERM): "SIGTERM",
	int(syscall.SIGCHLD): "SIGCHLD", int(syscall.SIGCONT): "SIGCONT", int(syscall.SIGSTOP): "SIGSTOP",
	int(syscall.SIGTSTP): "SIGTSTP", int(syscall.SIGTTIN): "SIGTTIN", int(syscall.SIGTTOU): "SIGTTOU",
	int(syscall.SIGURG): "SIGURG", int(syscall.SIGXCPU): "SIGXCPU", int(syscall.SIGXFSZ): "SIGXFSZ",
	int(syscall.SIGVTALRM): "SIGVTALRM", int(syscall.SIGPROF): "SIGPROF", int(syscall.SIGWINCH): "SIGWINCH",
	int(syscall.SIGIO): "SIGIO", int(syscall.SIGSYS): "SIGSYS",
}
