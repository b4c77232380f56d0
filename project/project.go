// Package project assembles what a model needs to know about where it
// works, for the system prompt: an environment block (the folder, whether
// it is a git repository and on which branch, the platform, the date, the
// model) and the project's instructions, the AGENTS.md files (and the file
// the model family's own tools read: CLAUDE.md for Anthropic's, GEMINI.md
// for Google's) from the repository's root down to the folder.
package project

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultBudget bounds the project instructions, in bytes (the agent-loop
// reference's 32 KB).
const DefaultBudget = 32 << 10

// Options say what to gather.
type Options struct {
	// Dir is the folder the agent works in (its workspace).
	Dir string
	// Provider and Model name the model (the environment block shows the
	// model; the provider picks the family's own instructions file).
	Provider, Model string
	// Environment includes the environment block.
	Environment bool
	// NoGit leaves git's summary (which runs git) out of the block.
	NoGit bool
	// Docs are the instruction files' names to read at each level; nil
	// takes DocNames(Provider), an empty non-nil list reads none.
	Docs []string
	// Budget bounds the instructions in bytes (DefaultBudget when 0).
	Budget int
	// Now is the clock (time.Now when nil); GOOS the platform
	// (runtime.GOOS when ""); OSVersion the system's version (read from
	// the system when "").
	Now       func() time.Time
	GOOS      string
	OSVersion string
}

// EnvironmentBudget bounds the environment block, in bytes: the git
// summary (the last commits' subjects first) is shortened to fit it.
const EnvironmentBudget = 2048

// recentCommits is how many commit subjects the block lists.
const recentCommits = 5

// maxSubject bounds one commit subject in the block, in bytes.
const maxSubject = 160

// DocNames are the instruction files read for a provider: AGENTS.md
// always, and the file of the family's own tools.
func DocNames(provider string) []string {
	switch provider {
	case "anthropic":
		return []string{"AGENTS.md", "CLAUDE.md"}
	case "google":
		return []string{"AGENTS.md", "GEMINI.md"}
	}
	return []string{"AGENTS.md"}
}

// Doc is one instructions file that was read.
type Doc struct {
	Path string
	Text string
	// Cut is how many bytes of it the budget left out.
	Cut int
}

// Context is what was gathered.
type Context struct {
	// Environment is the environment block ("" when off).
	Environment string
	// Docs are the instruction files, root first.
	Docs []Doc
	// Root is the git repository's root ("" outside one); Branch its
	// branch ("" when detached or unknown).
	Root, Branch string
	// Budget is the instructions' bound, in bytes.
	Budget int
}

// Gather reads the environment and the instruction files. Files that
// cannot be read are skipped: a project's instructions are a help, never
// a reason for an exchange to fail.
func Gather(o Options) Context {
	var c Context
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		dir = o.Dir
	}
	c.Root, c.Branch = gitRoot(dir)
	if o.Environment {
		c.Environment = environment(o, dir, c)
	}
	names := o.Docs
	if names == nil {
		names = DocNames(o.Provider)
	}
	if len(names) == 0 {
		return c
	}
	top := c.Root
	if top == "" {
		top = dir
	}
	var levels []string
	for d := dir; ; d = filepath.Dir(d) {
		levels = append([]string{d}, levels...)
		if d == top || filepath.Dir(d) == d {
			break
		}
	}
	for _, level := range levels {
		for _, name := range names {
			p := filepath.Join(level, name)
			text, ok := readDoc(p)
			if ok && strings.TrimSpace(text) != "" {
				c.Docs = append(c.Docs, Doc{Path: p, Text: text})
			}
		}
	}
	budget := o.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	c.Budget = budget
	// Deeper files are more specific and come later, winning over the
	// root's: when the whole does not fit, the shallowest are cut first.
	total := 0
	for _, d := range c.Docs {
		total += len(d.Text)
	}
	for i := 0; i < len(c.Docs) && total > budget; i++ {
		d := &c.Docs[i]
		over := total - budget
		keep := max(len(d.Text)-over, 0)
		for keep > 0 && keep < len(d.Text) && (d.Text[keep]&0xC0) == 0x80 {
			keep-- // not in the middle of a character
		}
		d.Cut = len(d.Text) - keep
		d.Text = d.Text[:keep]
		total -= d.Cut
	}
	return c
}

// maxDoc bounds the bytes read of one file.
const maxDoc = 1 << 20

func readDoc(p string) (string, bool) {
	info, err := os.Stat(p)
	if err != nil || !info.Mode().IsRegular() {
		return "", false
	}
	f, err := os.Open(p)
	if err != nil {
		return "", false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxDoc))
	if err != nil || bytes.IndexByte(data, 0) >= 0 {
		return "", false
	}
	return string(data), true
}

// gitRoot finds the repository dir is in, and its branch, by reading
// .git (a folder, or a file pointing at one, as worktrees have) without
// running git.
func gitRoot(dir string) (root, branch string) {
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, ".git")
		if info, err := os.Stat(p); err == nil {
			gitDir := p
			if !info.IsDir() {
				data, err := os.ReadFile(p)
				if err != nil {
					return d, ""
				}
				line := strings.TrimSpace(string(data))
				if !strings.HasPrefix(line, "gitdir:") {
					return d, ""
				}
				gitDir = strings.TrimSpace(strings.TrimPrefix(line, "gitdir:"))
				if !filepath.IsAbs(gitDir) {
					gitDir = filepath.Join(d, gitDir)
				}
			}
			head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
			if err == nil {
				if ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: refs/heads/"); ok {
					branch = ref
				}
			}
			return d, branch
		}
		if filepath.Dir(d) == d {
			return "", ""
		}
	}
}

func environment(o Options, dir string, c Context) string {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	goos := o.GOOS
	if goos == "" {
		goos = runtime.GOOS
	}
	osv := o.OSVersion
	if osv == "" {
		osv = systemVersion()
	}
	var head, tail strings.Builder
	head.WriteString("<environment>\n")
	fmt.Fprintf(&head, "Working directory: %s\n", dir)
	switch {
	case c.Root == "":
		head.WriteString("Git repository: no\n")
	case c.Branch != "":
		fmt.Fprintf(&head, "Git repository: yes, root %s, branch %s\n", c.Root, c.Branch)
	default:
		fmt.Fprintf(&head, "Git repository: yes, root %s, detached HEAD\n", c.Root)
	}
	fmt.Fprintf(&tail, "Platform: %s\n", goos)
	if osv != "" {
		fmt.Fprintf(&tail, "OS version: %s\n", osv)
	}
	fmt.Fprintf(&tail, "Today's date: %s\n", now().Format(time.DateOnly))
	if o.Model != "" {
		fmt.Fprintf(&tail, "Model: %s\n", o.Model)
	}
	tail.WriteString("</environment>")
	var git string
	if c.Root != "" && !o.NoGit {
		git = gitLines(summarize(dir, recentCommits), EnvironmentBudget-head.Len()-tail.Len())
	}
	return head.String() + git + tail.String()
}

// gitLines writes the git summary in at most room bytes: the status
// counts, then as many of the commit subjects (each cut to maxSubject)
// as fit, newest first.
func gitLines(s gitSummary, room int) string {
	if !s.ok {
		return ""
	}
	var b strings.Builder
	status := fmt.Sprintf("Git status: %d modified, %d untracked\n", s.modified, s.untracked)
	if len(status) > room {
		return ""
	}
	b.WriteString(status)
	const title = "Recent commits:\n"
	var lines []string
	used := b.Len() + len(title)
	for _, subj := range s.subjects {
		if len(subj) > maxSubject {
			cut := maxSubject
			for cut > 0 && !utf8.RuneStart(subj[cut]) {
				cut--
			}
			subj = subj[:cut] + "…"
		}
		line := "- " + subj + "\n"
		if used+len(line) > room {
			break
		}
		used += len(line)
		lines = append(lines, line)
	}
	if len(lines) > 0 {
		b.WriteString(title)
		b.WriteString(strings.Join(lines, ""))
	}
	return b.String()
}

// Instructions is the project instructions part of the system prompt:
// each file under a line naming it, root first, and a note for what the
// budget cut.
func (c Context) Instructions() string {
	if len(c.Docs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Project instructions (from the repository's root down to the working directory; later ones are more specific and win):\n")
	for _, d := range c.Docs {
		fmt.Fprintf(&b, "\n--- %s ---\n%s", d.Path, strings.TrimRight(d.Text, "\n"))
		if d.Cut > 0 {
			fmt.Fprintf(&b, "\n[Project instructions truncated at %dKB: the last %d bytes of %s were left out]", (c.Budget+1023)/1024, d.Cut, d.Path)
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// Text is the whole context: the environment block, then the
// instructions.
func (c Context) Text() string {
	var parts []string
	if c.Environment != "" {
		parts = append(parts, c.Environment)
	}
	if s := c.Instructions(); s != "" {
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n\n")
}
