package project

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, p, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGather(t *testing.T) {
	repo := t.TempDir()
	write(t, filepath.Join(repo, ".git", "HEAD"), "ref: refs/heads/feature/x\n")
	write(t, filepath.Join(repo, "AGENTS.md"), "Root rules.\n")
	write(t, filepath.Join(repo, "CLAUDE.md"), "Claude at the root.\n")
	write(t, filepath.Join(repo, "GEMINI.md"), "Gemini at the root.\n")
	work := filepath.Join(repo, "svc", "api")
	write(t, filepath.Join(repo, "svc", "AGENTS.md"), "Service rules.\n")
	write(t, filepath.Join(work, "AGENTS.md"), "API rules win.\n")
	write(t, filepath.Join(filepath.Dir(repo), "AGENTS.md"), "Above the repository: never read.\n")
	now := func() time.Time { return time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC) }

	c := Gather(Options{Dir: work, Provider: "anthropic", Model: "claude-sonnet-4-5", Environment: true, Now: now, GOOS: "linux", OSVersion: "Debian GNU/Linux 12 (bookworm)"})
	want := "<environment>\nWorking directory: " + work + "\nGit repository: yes, root " + repo + ", branch feature/x\nPlatform: linux\nOS version: Debian GNU/Linux 12 (bookworm)\nToday's date: 2026-11-26\nModel: claude-sonnet-4-5\n</environment>"
	if c.Environment != want {
		t.Errorf("environment:\n%s\nwant:\n%s", c.Environment, want)
	}
	var got []string
	for _, d := range c.Docs {
		got = append(got, strings.TrimSpace(d.Text))
	}
	if strings.Join(got, "|") != "Root rules.|Claude at the root.|Service rules.|API rules win." {
		t.Errorf("docs: %q", got)
	}
	text := c.Text()
	if strings.Index(text, "Root rules.") > strings.Index(text, "API rules win.") || strings.Contains(text, "Gemini") || strings.Contains(text, "Above the repository") {
		t.Errorf("text:\n%s", text)
	}

	// Gemini's file for Google; none but AGENTS.md for OpenAI; none when off.
	if c := Gather(Options{Dir: work, Provider: "google"}); !strings.Contains(c.Text(), "Gemini at the root.") || strings.Contains(c.Text(), "Claude") {
		t.Errorf("google: %s", c.Text())
	}
	if c := Gather(Options{Dir: work, Provider: "openai"}); strings.Contains(c.Text(), "Claude") || !strings.Contains(c.Text(), "Root rules.") || c.Environment != "" {
		t.Errorf("openai: %s", c.Text())
	}
	if c := Gather(Options{Dir: work, Docs: []string{}}); c.Text() != "" {
		t.Errorf("no docs: %q", c.Text())
	}

	// The budget cuts the shallowest first and says so.
	c = Gather(Options{Dir: work, Provider: "openai", Budget: len("Service rules.\nAPI rules win.\n") + 5})
	if c.Docs[0].Cut != len("Root rules.\n")-5 || c.Docs[1].Cut != 0 || c.Docs[2].Text != "API rules win.\n" {
		t.Errorf("cut: %+v", c.Docs)
	}
	if !strings.Contains(c.Text(), "[Project instructions truncated at 1KB: the last 7 bytes of "+filepath.Join(repo, "AGENTS.md")+" were left out]") {
		t.Errorf("no note:\n%s", c.Text())
	}
}

func TestWorktreeAndNoRepository(t *testing.T) {
	main := t.TempDir()
	write(t, filepath.Join(main, ".git", "worktrees", "wt", "HEAD"), "ref: refs/heads/wt-branch\n")
	wt := t.TempDir()
	write(t, filepath.Join(wt, ".git"), "gitdir: "+filepath.Join(main, ".git", "worktrees", "wt")+"\n")
	if root, branch := gitRoot(filepath.Join(wt, "a", "b")); root != wt || branch != "wt-branch" {
		t.Errorf("worktree: %q %q", root, branch)
	}
	plain := t.TempDir()
	write(t, filepath.Join(plain, "AGENTS.md"), "Here.\n")
	c := Gather(Options{Dir: plain, Environment: true})
	if !strings.Contains(c.Environment, "Git repository: no") || len(c.Docs) != 1 {
		t.Errorf("no repository: %+v", c)
	}
}

// In a real repository the block has git's counts (changed files,
// staged or not; untracked files) and the last five commits' subjects,
// newest first; the date is YYYY-MM-DD; the OS version is the system's.
func TestEnvironmentGitSummary(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+repo)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	for i := 1; i <= 7; i++ {
		write(t, filepath.Join(repo, "f.txt"), strings.Repeat("x", i))
		git("add", "f.txt")
		git("commit", "-q", "-m", "change "+strings.Repeat("I", i))
	}
	write(t, filepath.Join(repo, "f.txt"), "changed")
	write(t, filepath.Join(repo, "staged.txt"), "new")
	git("add", "staged.txt")
	write(t, filepath.Join(repo, "a.tmp"), "a")
	write(t, filepath.Join(repo, "sub", "b.tmp"), "b")
	now := func() time.Time { return time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC) }
	c := Gather(Options{Dir: repo, Environment: true, Now: now, Docs: []string{}})
	for _, want := range []string{
		"Git repository: yes, root " + repo + ", branch main\n",
		"Git status: 2 modified, 2 untracked\n",
		"Recent commits:\n- change IIIIIII\n- change IIIIII\n- change IIIII\n- change IIII\n- change III\nPlatform: ",
		"Today's date: 2026-11-29\n",
		"OS version: " + osVersion() + "\n",
	} {
		if !strings.Contains(c.Environment, want) {
			t.Errorf("the block lacks %q:\n%s", want, c.Environment)
		}
	}
	if osVersion() == "" {
		t.Error("no OS version")
	}
	if c := Gather(Options{Dir: repo, Environment: true, Now: now, Docs: []string{}, NoGit: true}); strings.Contains(c.Environment, "Git status") || strings.Contains(c.Environment, "Recent commits") {
		t.Errorf("NoGit:\n%s", c.Environment)
	}

	// Long subjects are cut, and the block stays within its budget.
	for i := 0; i < 5; i++ {
		write(t, filepath.Join(repo, "f.txt"), strings.Repeat("y", i+1))
		git("commit", "-q", "-a", "-m", strings.Repeat("long subject ", 100))
	}
	c = Gather(Options{Dir: repo, Environment: true, Now: now, Docs: []string{}})
	if len(c.Environment) > EnvironmentBudget || !strings.Contains(c.Environment, "…") || !strings.HasSuffix(c.Environment, "</environment>") {
		t.Errorf("%d bytes (budget %d):\n%s", len(c.Environment), EnvironmentBudget, c.Environment)
	}
}
