// Package environment says where nb's files and exec built-ins work: on
// this machine (an os.Root workspace, commands through package proc and
// bubblewrap) or on another one (package remote: SSH and SFTP). The
// tools are written once against the interfaces here, so the same
// tools, limits and confirmations hold wherever they run.
//
// Names given to Files are relative to the workspace, slash-separated
// and clean; an implementation refuses any that leads out of it (by
// "..", an absolute path or a symbolic link) with an error that
// IsEscape recognizes.
package environment

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// Environment is a workspace's files and the way to run commands in it.
type Environment interface {
	Files
	Runner
}

// Files are the file operations the file tools need, on names relative
// to the workspace (see the package's doc). *os.Root has them all but
// OpenFile's and Open's result type; Local adapts it.
type Files interface {
	// OpenFile opens name with os.OpenFile's flags (the tools use
	// O_RDONLY|O_NONBLOCK to read and O_WRONLY|O_CREATE|O_EXCL to write).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Open opens name for reading.
	Open(name string) (File, error)
	Stat(name string) (fs.FileInfo, error)
	Lstat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	MkdirAll(name string, perm fs.FileMode) error
	Remove(name string) error
	Rename(oldname, newname string) error
	// FS is the workspace as an fs.FS, for walks (fs.ReadDirFS and
	// fs.StatFS where the implementation can).
	FS() fs.FS
	// Close releases the workspace (and, remotely, nothing else: the
	// connection is shared).
	Close() error
}

// File is an open file of Files.
type File interface {
	io.Reader
	io.Writer
	io.Seeker
	io.Closer
	Stat() (fs.FileInfo, error)
	Chmod(mode fs.FileMode) error
	Sync() error
}

// Runner runs the exec built-in's commands somewhere other than here
// (the local runner is package shell's own, with bubblewrap).
type Runner interface {
	// Run runs c.Line in the workspace, with an empty standard input,
	// streaming its output to c.Stdout and c.Stderr as it comes, in a
	// process group of its own that is stopped (SIGTERM, then SIGKILL
	// after Grace) at c.Timeout or when ctx ends, and whose leftovers
	// are killed when the command ends. An error means the command could
	// not be run at all.
	Run(ctx context.Context, c Command) (Exit, error)
	// Where says where commands run, for confirmations and the tool's
	// description: "on dev@build1 over SSH, with that user's rights".
	Where() string
	// Dir is the workspace's absolute path on its machine.
	Dir() string
}

// Command is one command for a Runner.
type Command struct {
	// Line is the shell command.
	Line string
	// Timeout stops the command's group when it is over.
	Timeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL.
	Grace time.Duration
	// Env are NAME=value entries the command sees beside the remote
	// side's own environment: only what the cartridge allowed.
	Env []string
	// PathAppend is appended to the PATH the command sees.
	PathAppend string
	// Stdout and Stderr receive the output as it comes.
	Stdout, Stderr io.Writer
}

// Exit is how a command ended.
type Exit struct {
	// Code is the exit code (-1 when unknown).
	Code int
	// Signal names the signal that killed the command, when one did.
	Signal string
	// TimedOut is true when the timeout stopped the command.
	TimedOut bool
}

// ErrEscape is wrapped by the errors of paths that lead out of the
// workspace.
var ErrEscape = errors.New("path escapes from parent")

// IsEscape reports whether err refuses a path that leaves the
// workspace: ErrEscape, or os.Root's own refusal (which the standard
// library does not export, only its text).
func IsEscape(err error) bool {
	return err != nil && (errors.Is(err, ErrEscape) || strings.Contains(err.Error(), "path escapes from parent"))
}

// Local is Files on an os.Root.
func Local(root *os.Root) Files { return localFiles{root} }

type localFiles struct{ *os.Root }

func (l localFiles) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := l.Root.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (l localFiles) Open(name string) (File, error) {
	f, err := l.Root.Open(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}
