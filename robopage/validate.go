package robopage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// ValidateOptions chooses the checks of Validate that depend on the host.
type ValidateOptions struct {
	// Executor gives the PATH, the operating system and the container
	// engine; nil is a new Executor.
	Executor *Executor
	// Host checks that each program is on the host PATH or has a container.
	Host bool
	// Containers makes the images of the functions that need one (pull or
	// build) and checks that the host side of their volumes exists.
	Containers bool
}

// Validate checks the loaded pages and returns the problems found, with
// those of loading first. A page with an Error problem is broken: a call
// to the function concerned cannot succeed. Warnings point at pages that
// work, but not as their author probably meant.
func (l *Library) Validate(ctx context.Context, opts ValidateOptions) []Problem {
	ex := opts.Executor
	if ex == nil {
		ex = &Executor{}
	}
	ps := append([]Problem(nil), l.Problems...)
	var eng engineTrouble
	for _, page := range l.Pages {
		file := l.fileOf(page)
		if len(page.Functions) == 0 {
			ps = append(ps, Problem{File: file, Severity: Error, Message: "the page has no functions: add at least one under `functions`"})
		}
		for _, f := range page.Functions {
			for _, p := range validateFunction(ctx, f, ex, opts, &eng) {
				p.File = file
				if p.Line == 0 {
					p.Line = f.Line
				}
				p.Function = f.Name
				ps = append(ps, p)
			}
		}
	}
	if eng.err != nil {
		// One engine failure is every container's failure: say it once.
		ps = append(ps, Problem{File: l.Root, Severity: Error, Engine: true, Message: fmt.Sprintf("%v: the images of %s that need a container were not checked", eng.err, plural(eng.functions, "function"))})
	}
	sortProblems(ps)
	return ps
}

// engineTrouble collects a container engine's failure, found once for
// every function that needs it.
type engineTrouble struct {
	err       error
	functions int
}

// fileOf is the page's file as problems name it.
func (l *Library) fileOf(page *Page) string {
	if page.File != "" {
		return page.File
	}
	return page.Path
}

func validateFunction(ctx context.Context, f *Function, ex *Executor, opts ValidateOptions, eng *engineTrouble) []Problem {
	var ps []Problem
	line := 0 // the line of the next problem; 0 is the function's
	bad := func(format string, args ...any) {
		ps = append(ps, Problem{Line: line, Severity: Error, Message: fmt.Sprintf(format, args...)})
		line = 0
	}
	warn := func(format string, args ...any) {
		ps = append(ps, Problem{Line: line, Severity: Warning, Message: fmt.Sprintf(format, args...)})
		line = 0
	}
	if strings.TrimSpace(f.Description) == "" {
		bad("the description is empty: say what the function does, the model reads it")
	}
	if len(f.Parameters) == 0 {
		warn("no parameters: nb serves it, but the reference's validate rejects a function without parameters")
	}
	goos := ex.goos()
	cmdline, ok := f.CommandLine(goos)
	if !ok {
		bad("no command line for platform %s: add `%s` under `platforms`", goos, goos)
	}
	// Placeholders must name a parameter, unless they have a default.
	used := map[string]bool{}
	var undeclared []string
	where := map[string]int{}
	for _, lines := range allCommandLines(f) {
		for i, elem := range lines {
			for _, m := range placeholder().FindAllStringSubmatch(elem, -1) {
				name, hasDef := m[1], m[3] != ""
				if strings.HasPrefix(name, "env.") || strings.HasPrefix(name, "ENV.") {
					continue
				}
				if f.Parameter(name) == nil && !hasDef && !used[name] {
					undeclared = append(undeclared, name)
					if f.Cmdline != nil {
						where[name] = f.line("cmdline", strconv.Itoa(i))
					}
				}
				used[name] = true
			}
		}
	}
	sort.Strings(undeclared)
	for _, name := range undeclared {
		line = where[name]
		bad("${%s} names no parameter, so every call fails with \"argument %s not provided\": declare %s under `parameters` or fix the placeholder", name, name, name)
	}
	inVolumes := map[string]bool{}
	if c := f.Container; c != nil {
		for _, v := range c.Volumes {
			for _, name := range Placeholders(v) {
				inVolumes[name] = true
			}
		}
	}
	for _, p := range f.Parameters {
		if used[p.Name] {
			continue
		}
		line = f.line("parameters", p.Name)
		if inVolumes[p.Name] {
			warn("parameter %s is used only in `volumes`, which are not interpolated: its value is ignored", p.Name)
		} else {
			warn("parameter %s is not used by the command line: its value is ignored", p.Name)
		}
	}
	if c := f.Container; c != nil {
		for i, v := range c.Volumes {
			host, _, _ := strings.Cut(v, ":")
			line = f.line("container", "volumes", strconv.Itoa(i))
			switch {
			case strings.Contains(v, "$"):
				warn("volume %s: volumes are not interpolated, docker receives the text as is; only ${cwd} is replaced", v)
			case strings.HasPrefix(host, "."):
				warn("volume %s: docker rejects a relative host path; start it with ${cwd}/ for the page's folder", v)
			default:
				line = 0
			}
		}
		for i, a := range c.Args {
			if len(Placeholders(a)) > 0 {
				line = f.line("container", "args", strconv.Itoa(i))
				warn("container argument %s: `args` are not interpolated, docker receives the text as is", a)
			}
		}
		if first := firstProgram(cmdline); first != "" && !c.PreserveApp {
			line = f.line("cmdline")
			switch {
			case strings.HasPrefix(first, "-"):
				warn("the first cmdline item %s is dropped when the function runs in its container (the program is replaced by the image's entrypoint): put the program first, or set preserve_app", first)
			case len(Placeholders(first)) > 0:
				warn("the first cmdline item %s is dropped when the function runs in its container (the program is replaced by the image's entrypoint): put the program first, or set preserve_app", first)
			default:
				line = 0
			}
		}
	}
	if !ok {
		return ps
	}
	program := firstProgram(cmdline)
	if program == "" {
		bad("the command line is empty: its first item is the program to run")
		return ps
	}
	sudo := false
	for _, e := range cmdline {
		sudo = sudo || e == "sudo"
	}
	if !opts.Host && !opts.Containers {
		return ps
	}
	_, onPath := ex.LookPath(program)
	if len(Placeholders(program)) > 0 {
		onPath = false
	}
	c := f.Container
	needs := sudo || !onPath || (c != nil && c.Force)
	if opts.Host && needs && c == nil {
		if sudo {
			bad("the command line asks for sudo but the function has no container: nb never runs sudo on the host; add a container")
		} else {
			bad("program %s is not on PATH and the function has no container: install %s or add a container", program, program)
		}
	}
	if opts.Containers && needs && c != nil {
		engine, err := ex.engine()
		if err == nil {
			err = ex.ensureImage(ctx, engine, c)
		}
		var ee *EngineError
		switch {
		case err == nil:
		case errors.As(err, &ee) || engine == "":
			eng.err = err
			eng.functions++
		default:
			bad("image %s: %v", c.ImageName(), err)
		}
		for _, v := range c.Volumes {
			host, _, _ := strings.Cut(v, ":")
			if host == "" || !strings.ContainsAny(host, "/.~$") {
				continue // a named volume
			}
			if _, err := os.Stat(ExpandPath(host, ex.Environ)); err != nil {
				bad("volume %s: the host path %s does not exist", v, host)
			}
		}
	}
	return ps
}

func allCommandLines(f *Function) [][]string {
	if f.Cmdline != nil {
		return [][]string{f.Cmdline}
	}
	var out [][]string
	for _, c := range f.Platforms {
		out = append(out, c)
	}
	return out
}

// firstProgram is the first item of a command line that is not sudo.
func firstProgram(cmdline []string) string {
	for _, e := range cmdline {
		if e != "sudo" {
			return e
		}
	}
	return ""
}
