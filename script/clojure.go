package script

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// errSandboxedClojure is the reference's message, verbatim.
var errSandboxedClojure = errors.New("Sandboxed Clojure not supported.")

// callClojure runs a Clojure source through Babashka as the reference
// does: the parameters go through a temporary JSON file and are bound by
// name (with string keys), the program runs as
//
//	bb --prn <file> | bb -e "(->> *in* slurp read-string print)"
//
// and its standard output is the result; on failure the standard error
// is the error.
func (r *Runtime) callClojure(ctx context.Context, src Source, params []Param) (any, error) {
	if r.opts.Sandboxed {
		return nil, errSandboxedClojure
	}
	bb, err := exec.LookPath("bb")
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
	paramsFile := dir + string(os.PathSeparator) + "parameters.json"
	if err := os.WriteFile(paramsFile, data, 0o600); err != nil {
		return nil, fmt.Errorf("run Clojure: %w", err)
	}
	program := clojureProgram(src.Code, paramsFile, params)
	progFile := dir + string(os.PathSeparator) + "program.clj"
	if err := os.WriteFile(progFile, []byte(program), 0o600); err != nil {
		return nil, fmt.Errorf("run Clojure: %w", err)
	}

	timeout := r.opts.Limits.Timeout
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	env := childEnv(os.Environ())
	run := exec.CommandContext(cctx, bb, "--prn", progFile)
	printer := exec.CommandContext(cctx, bb, "-e", "(->> *in* slurp read-string print)")
	run.Env, printer.Env = env, env
	var out, runErr, printErr bytes.Buffer
	pipe, err := run.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("run Clojure: %w", err)
	}
	run.Stderr = &runErr
	printer.Stdin = pipe
	printer.Stdout = &out
	printer.Stderr = &printErr
	if err := run.Start(); err != nil {
		return nil, fmt.Errorf("run Clojure with %s: %w", bb, err)
	}
	if err := printer.Start(); err != nil {
		_ = run.Process.Kill()
		_ = run.Wait()
		return nil, fmt.Errorf("run Clojure with %s: %w", bb, err)
	}
	errRun := run.Wait()
	errPrint := printer.Wait()
	if cctx.Err() != nil {
		if errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("Clojure script stopped: timed out after %s", timeout)
		}
		return nil, fmt.Errorf("Clojure script stopped: %w", cctx.Err())
	}
	if errRun != nil || errPrint != nil {
		msg := strings.TrimSpace(runErr.String() + printErr.String())
		if msg == "" {
			msg = fmt.Sprint(errors.Join(errRun, errPrint))
		}
		return nil, &RuntimeError{Lang: Clojure, Message: msg}
	}
	return out.String(), nil
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

// secretSuffixes mark variables a child process must not inherit.
var secretSuffixes = []string{"_KEY", "_TOKEN", "_PASSWORD", "_PASSWD"}

// childEnv drops secrets from env: variables named like *_KEY (API keys),
// *_TOKEN, *_PASSWORD, *_PASSWD, or containing SECRET or CREDENTIAL (such
// as AWS_SECRET_ACCESS_KEY, GOOGLE_APPLICATION_CREDENTIALS), and the state
// encryption password.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if isSecretName(name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func isSecretName(name string) bool {
	up := strings.ToUpper(name)
	if up == "NANO_BOTS_ENCRYPTION_PASSWORD" || strings.Contains(up, "CREDENTIAL") || strings.Contains(up, "SECRET") {
		return true
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(up, s) {
			return true
		}
	}
	return false
}
