package project

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// gitTimeout bounds each git command of the environment block: a huge
// repository leaves its summary out rather than delay the exchange.
const gitTimeout = 2 * time.Second

// gitSummary is what git says of a repository: how many files changed
// (staged or not) and are untracked, and the subjects of the last
// commits, newest first.
type gitSummary struct {
	ok                  bool
	modified, untracked int
	subjects            []string
}

// summarize asks git about the repository dir is in. git runs with what
// the environment block needs and no more: no optional locks (it never
// writes the index), no file-system monitor (a command the repository's
// configuration would name), no pager, no prompt, and an environment of
// PATH, HOME and the C locale only, so no secret reaches it. Without git,
// or when it fails or takes longer than gitTimeout, the summary is
// left out.
func summarize(dir string, commits int) gitSummary {
	var s gitSummary
	out, err := runGit(dir, "status", "--porcelain=v1", "-z", "--untracked-files=normal")
	if err != nil {
		return s
	}
	s.ok = true
	fields := bytes.Split(out, []byte{0})
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 {
			continue
		}
		switch xy := string(f[:2]); {
		case xy == "??":
			s.untracked++
		case xy == "!!":
		default:
			s.modified++
			if xy[0] == 'R' || xy[0] == 'C' {
				i++ // the entry's original path follows
			}
		}
	}
	if commits > 0 {
		out, err = runGit(dir, "log", "-n", strconv.Itoa(commits), "--format=%s")
		if err == nil {
			for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
				if line = strings.TrimSpace(line); line != "" {
					s.subjects = append(s.subjects, line)
				}
			}
		}
	}
	return s
}

func runGit(dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	base := []string{"-C", dir, "--no-optional-locks", "--no-pager", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false", "-c", "color.ui=false"}
	cmd := exec.CommandContext(ctx, "git", append(base, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0"}
	cmd.WaitDelay = time.Second
	return cmd.Output()
}
