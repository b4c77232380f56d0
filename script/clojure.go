package script

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nbots/nb/proc"
)

// errSandboxedClojure starts with the reference's message, verbatim.
var errSandboxedClojure = errors.New("Sandboxed Clojure not supported. " +
	"Clojure functions run through Babashka (bb), outside the sandbox: to run them, set safety: {functions: {sandboxed: false}} in the cartridge " +
	"(unsandboxed functions run with your permissions; see docs/scripts.md)")

// clojureEnvNames are the variables bb gets besides proc.BaseNames:
// Babashka's own configuration (BABASHKA_CLASSPATH, BABASHKA_PRELOADS)
// and JAVA_HOME, which bb reads only to resolve dependencies. bb is a
// native binary and needs nothing else.
var clojureEnvNames = []string{"BABASHKA_CLASSPATH", "BABASHKA_PRELOADS", "JAVA_HOME"}

// callClojure runs a Clojure source through Babashka as the reference
// does: the parameters go through a temporary JSON file and are bound by
// name (with string keys), the program runs as
//
//	bb --prn <file> | bb -e "(->> *in* slurp read-string print)"
//
// and its standard output is the result; on failure the standard error
// is the error. Both processes run in their own process group, stopped
// with the call (cancellation, timeout), with an allow-listed
// environment (Options.Environ through proc.Env and clojureEnvNames).
func (r *Runtime) callClojure(ctx context.Context, src Source, params []Param) (any, error) {
	if r.opts.Sandboxed {
		return nil, errSandboxedClojure
	}
	env := proc.Env(r.opts.Environ, clojureEnvNames)
	path, _ := proc.Lookup(env, "PATH")
	bb, err := lookPath("bb", path)
	if err != nil {
		return nil, errors.New("Clojure functions need Babashka: install bb (https://babashka.org) and put it on PATH")
	}
	values := map[string]any{}
	for _, p := range params {
		values[p.Name] = p.Value
	}
	data, err := json.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("encode the Clojure parameters: %w", err)
	}
	dir, err := os.MkdirTemp("", "nb-clojure-")
	if err != nil {
		return nil, fmt.Errorf("run Clojure: %w", err)
	}
	defer os.RemoveAll(dir)
	paramsFile := filepath.Join(dir, "parameters.json")
	if err := os.WriteFile(paramsFile, data, 0o600); err != nil {
		return nil, fmt.Errorf("run Clojure: %w", err)
	}
	program := clojureProgram(src.Code, paramsFile, params)
	progFile := filepath.Join(dir, "program.clj")
	if err := os.WriteFile(progFile, []byte(program), 0o600); err != nil {
		return nil, fmt.Errorf("run Clojure: %w", err)
	}

	timeout := r.opts.Limits.Timeout
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := newCallOutput(ctx)
	defer out.close()
	run := proc.Command(cctx, bb, "--prn", progFile)
	printer := proc.Command(cctx, bb, "-e", "(->> *in* slurp read-string print)")
	run.Env, printer.Env = env, env
	defer proc.Reap(run)
	defer proc.Reap(printer)
	var result, runErr, printErr bytes.Buffer
	pipe, err := run.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("run Clojure: %w", err)
	}
	run.Stderr = io.MultiWriter(&runErr, out)
	printer.Stdin = pipe
	printer.Stdout = &result
	printer.Stderr = io.MultiWriter(&printErr, out)
	if err := run.Start(); err != nil {
		return nil, fmt.Errorf("run Clojure with %s: %w", bb, err)
	}
	if err := printer.Start(); err != nil {
		cancel()
		_ = run.Wait()
		return nil, fmt.Errorf("run Clojure with %s: %w", bb, err)
	}
	errPrint := printer.Wait()
	errRun := run.Wait()
	if cctx.Err() != nil {
		kind := LimitCanceled
		if errors.Is(cctx.Err(), context.DeadlineExceeded) {
			kind = LimitTimeout
		}
		if kind == LimitTimeout && ctx.Err() == nil {
			return nil, &LimitError{Lang: Clojure, Kind: kind, After: timeout}
		}
		return nil, &LimitError{Lang: Clojure, Kind: kind}
	}
	if errRun != nil || errPrint != nil {
		msg := strings.TrimSpace(runErr.String() + printErr.String())
		if msg == "" {
			msg = fmt.Sprint(errors.Join(errRun, errPrint))
		}
		return nil, &RuntimeError{Lang: Clojure, Message: msg}
	}
	return result.String(), nil
}

// lookPath finds an executable named file in the directories of path (a
// PATH value), as exec.LookPath does with nb's own PATH.
func lookPath(file, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// clojureProgram binds each parameter name to its value read from the
// JSON file, then evaluates the source. Babashka bundles cheshire.
func clojureProgram(code, paramsFile string, params []Param) string {
	var b strings.Builder
	b.WriteString("(require '[cheshire.core])\n")
	fmt.Fprintf(&b, "(def injected-parameters (cheshire.core/parse-string (slurp %s)))\n", clojureString(paramsFile))
	b.WriteString("(let [")
	for i, p := range params {
		if i > 0 {
			b.WriteString("\n      ")
		}
		fmt.Fprintf(&b, "%s (get injected-parameters %s)", p.Name, clojureString(p.Name))
	}
	b.WriteString("]\n")
	b.WriteString(code)
	b.WriteString("\n)\n")
	return b.String()
}

// clojureString quotes s as a Clojure string literal.
func clojureString(s string) string {
	b, _ := json.Marshal(s) // JSON string escapes are valid Clojure ones for this purpose
	return string(b)
}
