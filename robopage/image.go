package robopage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nbots/nb/proc"
)

// ensureImage makes the container's image available, once per executor:
// a pulled image is pulled only when `<engine> images -q` does not list it
// (an existing image is never updated); a built image is built with
// `<engine> build -f <path> -t <name> --quiet <folder of path>`. Unlike the
// reference no shell is involved.
func (e *Executor) ensureImage(ctx context.Context, engine string, c *Container) error {
	key := engine + "\x00" + c.ImageName()
	if c.Build != nil {
		key += "\x00" + c.Build.Path
	}
	e.imgMu.Lock()
	defer e.imgMu.Unlock()
	if e.images[key] {
		return nil
	}
	if err := e.checkEngine(ctx, engine); err != nil {
		return err
	}
	if c.Build != nil {
		st, err := os.Stat(c.Build.Path)
		if err != nil {
			return fmt.Errorf("dockerfile '%s' does not exist", c.Build.Path)
		}
		if st.IsDir() {
			return fmt.Errorf("path '%s' is not a dockerfile", c.Build.Path)
		}
		if err := e.engineCmd(ctx, engine, "build", "-f", c.Build.Path, "-t", c.Build.Name, "--quiet", filepath.Dir(c.Build.Path)); err != nil {
			return err
		}
	} else {
		out, err := e.engineOutput(ctx, engine, "images", "-q", c.Image)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) == "" {
			args := []string{"pull"}
			if c.Platform != "" {
				args = append(args, "--platform", c.Platform)
			}
			if err := e.engineCmd(ctx, engine, append(args, c.Image)...); err != nil {
				return err
			}
		}
	}
	e.images[key] = true
	return nil
}

// EngineError is a container engine that does not answer (its daemon is
// not running, its socket is not reachable): every function that needs a
// container fails the same way, so callers say it once.
type EngineError struct {
	// Engine is the engine's path.
	Engine string
	// Err is the failure of `<engine> version`.
	Err error
}

func (e *EngineError) Error() string {
	return fmt.Sprintf("container engine %s does not answer: %v", filepath.Base(e.Engine), e.Err)
}

func (e *EngineError) Unwrap() error { return e.Err }

// engineRetry is how long a failed engine check stands before the engine
// is asked again: a batch of functions hears the failure once, and a
// server notices when the engine comes back.
const engineRetry = 5 * time.Second

// checkEngine asks the engine for its version, until it answers once.
func (e *Executor) checkEngine(ctx context.Context, engine string) error {
	e.engMu.Lock()
	defer e.engMu.Unlock()
	if e.engOK {
		return nil
	}
	if e.engErr != nil && time.Since(e.engAt) < engineRetry {
		return e.engErr
	}
	if _, err := e.engineOutput(ctx, engine, "version"); err != nil {
		if ctx.Err() != nil {
			return err
		}
		e.engErr, e.engAt = &EngineError{Engine: engine, Err: err}, time.Now()
		return e.engErr
	}
	e.engOK, e.engErr = true, nil
	return nil
}

func (e *Executor) engineCmd(ctx context.Context, engine string, args ...string) error {
	_, err := e.engineOutput(ctx, engine, args...)
	return err
}

// engineOutput runs the container engine and returns its stdout; a
// failure is the reference's "command failed with status: ..." followed
// by the command and the last line the engine printed on stderr.
func (e *Executor) engineOutput(ctx context.Context, engine string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, engine, args...)
	cmd.Env = e.engineEnv()
	cmd.Dir = e.Dir
	var stdout bytes.Buffer
	stderr := &capped{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := proc.SetupOptions(cmd, proc.Options{Mechanism: e.Mechanism}); err != nil {
		return "", err
	}
	defer proc.Reap(cmd)
	if err := cmd.Run(); err != nil {
		if cmd.ProcessState == nil {
			return "", spawnError(err)
		}
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		detail := filepath.Base(engine) + " " + strings.Join(args, " ")
		if msg != "" {
			detail += ": " + msg
		}
		return "", fmt.Errorf("command failed with status: %s (%s)", exitText(cmd.ProcessState), detail)
	}
	return stdout.String(), nil
}

// Prefetch pulls or builds the image of every function of lib that has a
// container, as the reference's `serve` does without --lazy. Unlike the
// reference a failure does not stop the others: it is returned as a
// warning and the function still fails on each call until its image can
// be made. A missing or silent engine is one warning for all.
func (e *Executor) Prefetch(ctx context.Context, lib *Library) []Problem {
	var ps []Problem
	var need []*Function
	for _, f := range lib.Functions() {
		if f.Container != nil {
			need = append(need, f)
		}
	}
	if len(need) == 0 {
		return nil
	}
	engine, err := e.engine()
	if err != nil {
		return []Problem{{File: lib.Root, Severity: Warning, Engine: true, Message: fmt.Sprintf("%v; the %s that need a container fail until then", err, plural(len(need), "function"))}}
	}
	for i, f := range need {
		err := e.ensureImage(ctx, engine, f.Container)
		var ee *EngineError
		if errors.As(err, &ee) {
			return append(ps, Problem{File: lib.Root, Severity: Warning, Engine: true, Message: fmt.Sprintf("%v; the images of %s were not made and their calls fail until the engine answers", err, plural(len(need)-i, "function"))})
		}
		if err != nil {
			ps = append(ps, Problem{File: f.Page.Path, Line: f.Line, Function: f.Name, Severity: Warning, Message: err.Error()})
		}
	}
	return ps
}

// plural is "1 function" or "n functions".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
