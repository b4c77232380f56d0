//go:build !unix

package robopage

import (
	"os"
	"os/exec"
	"syscall"
)

func setProcessGroup(cmd *exec.Cmd) {}

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process != nil && sig == syscall.SIGKILL {
		_ = cmd.Process.Kill()
	}
}

func exitText(state *os.ProcessState) string { return state.String() }
