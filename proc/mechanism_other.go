//go:build unix && !linux

package proc

import (
	"fmt"
	"os/exec"
	"syscall"
)

// sysCall is empty: only the process group exists here.
type sysCall struct{}

// Detect returns the mechanism Auto uses: ProcessGroup, the only one
// outside Linux.
func Detect() Mechanism { return ProcessGroup }

// Available returns nil when this system provides m, else why not.
func Available(m Mechanism) error {
	if m == Auto || m == ProcessGroup {
		return nil
	}
	return fmt.Errorf("proc: %s needs Linux", m)
}

func namespaceOf(*exec.Cmd) Mechanism { return Auto }

func (c *call) prepare(m Mechanism) error {
	if m != ProcessGroup {
		return Available(m)
	}
	return nil
}

func (c *call) signalRest(syscall.Signal) {}
func (c *call) killRest()                 {}
func (c *call) reap()                     {}

func handling(int, syscall.Signal) disposition { return defaultAction }
