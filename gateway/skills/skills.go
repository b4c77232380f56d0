// Package skills reads the workspace's skills/<name>/SKILL.md files with
// nanobot's and OpenClaw's frontmatter unchanged, and writes the parts of
// the system prompt nanobot makes of them: a summary of every skill (the
// agent reads a body with read_file when it needs it) and the bodies of
// the available skills marked always, inlined. A skill is a folder the
// user put there: nothing is installed from anywhere.
package skills

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"
)

// Skill is one SKILL.md.
type Skill struct {
	// Name is the frontmatter's name, else the folder's.
	Name        string
	Description string
	// Path is the absolute path of SKILL.md.
	Path string
	// Source is "workspace" or "builtin".
	Source string
	// Always asks for the body in every system prompt.
	Always bool
	// Bins and Env are the requirements: commands on PATH, variables set.
	Bins, Env []string
	// Missing are the requirements not met ("CLI: gh", "ENV: X");
	// empty when the skill is available.
	Missing []string
	// Frontmatter is the whole frontmatter as parsed.
	Frontmatter map[string]any
}

// Available says whether every requirement is met.
func (s Skill) Available() bool { return len(s.Missing) == 0 }

// Loader finds skills.
type Loader struct {
	// Workspace holds skills/ (its skills shadow built-in ones of the same name).
	Workspace string
	// Builtin is a folder of built-in skills, "" for none.
	Builtin string
	// LookPath and Getenv check requirements (default exec.LookPath; a
	// nil Getenv sets no variable: the environment is the embedder's to
	// give, as nb gateway gives its own).
	LookPath func(string) (string, error)
	Getenv   func(string) string
}

// Load returns the skills sorted by name, and warnings naming the file of
// each skill it had to skip or could read only line by line (a frontmatter
// that is not YAML, as nanobot's classic parser allowed, is still read).
func (l *Loader) Load() ([]Skill, []error) {
	var out []Skill
	var errs []error
	seen := map[string]bool{}
	for _, src := range []struct{ dir, name string }{{filepath.Join(l.Workspace, "skills"), "workspace"}, {l.Builtin, "builtin"}} {
		if src.dir == "" {
			continue
		}
		entries, err := os.ReadDir(src.dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("skills: %w", err))
			}
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || seen[e.Name()] {
				continue
			}
			path := filepath.Join(src.dir, e.Name(), "SKILL.md")
			data, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("skill %s: %w", path, err))
				continue
			}
			if abs, err := filepath.Abs(path); err == nil {
				path = abs
			}
			s, err := l.parse(e.Name(), path, src.name, data)
			if err != nil {
				errs = append(errs, err)
			}
			seen[e.Name()] = true
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errs
}

func (l *Loader) parse(dir, path, source string, data []byte) (Skill, error) {
	s := Skill{Name: dir, Path: path, Source: source}
	front, _, ferr := split(string(data))
	fm, err := parseFrontmatter(front)
	if err != nil {
		ferr = fmt.Errorf("skill %s: frontmatter: %v (read line by line instead)", path, err)
	}
	s.Frontmatter = fm
	if v, ok := fm["name"].(string); ok && strings.TrimSpace(v) != "" {
		s.Name = strings.TrimSpace(v)
	}
	if v, ok := fm["description"].(string); ok {
		s.Description = strings.TrimSpace(v)
	}
	if s.Description == "" {
		s.Description = s.Name
	}
	s.Always = truthy(fm["always"])
	meta := metadata(fm["metadata"])
	if truthy(meta["always"]) {
		s.Always = true
	}
	req, _ := meta["requires"].(map[string]any)
	if req == nil {
		req, _ = fm["requires"].(map[string]any)
	}
	s.Bins, s.Env = stringList(req["bins"]), stringList(req["env"])
	lookPath, getenv := l.LookPath, l.Getenv
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	for _, b := range s.Bins {
		if _, err := lookPath(b); err != nil {
			s.Missing = append(s.Missing, "CLI: "+b)
		}
	}
	for _, e := range s.Env {
		if getenv(e) == "" {
			s.Missing = append(s.Missing, "ENV: "+e)
		}
	}
	return s, ferr
}

// split cuts a SKILL.md into its frontmatter (between "---" lines at the
// top) and its body.
func split(text string) (front, body string, err error) {
	text = strings.TrimPrefix(strings.ReplaceAll(text, "\r\n", "\n"), "\ufeff")
	if !strings.HasPrefix(text, "---\n") {
		return "", text, nil
	}
	rest := text[4:]
	end := strings.Index(rest, "\n---")
	if end < 0 {
		return "", text, nil
	}
	after := rest[end+4:]
	if i := strings.IndexByte(after, '\n'); i >= 0 {
		after = after[i+1:]
	} else {
		after = ""
	}
	return rest[:end], after, nil
}

// parseFrontmatter reads YAML; what YAML refuses (nanobot's classic parser
// split "key: value" lines naively, so files written for it may have
// unquoted colons) is read that way.
func parseFrontmatter(front string) (map[string]any, error) {
	fm := map[string]any{}
	if strings.TrimSpace(front) == "" {
		return fm, nil
	}
	err := yaml.Unmarshal([]byte(front), &fm)
	if err == nil {
		if fm == nil {
			fm = map[string]any{}
		}
		return fm, nil
	}
	fm = map[string]any{}
	for _, line := range strings.Split(front, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, " ") {
			continue
		}
		fm[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return fm, errors.New(strings.SplitN(err.Error(), "\n", 2)[0])
}

// metadata is the frontmatter's metadata under "nanobot" or "openclaw":
// a JSON text, as nanobot writes it, or a YAML mapping.
func metadata(v any) map[string]any {
	var m map[string]any
	switch x := v.(type) {
	case string:
		if json.Unmarshal([]byte(x), &m) != nil {
			return nil
		}
	case map[string]any:
		m = x
	default:
		return nil
	}
	for _, k := range []string{"nanobot", "openclaw"} {
		if sub, ok := m[k].(map[string]any); ok {
			return sub
		}
	}
	return nil
}

func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return strings.EqualFold(strings.TrimSpace(x), "true")
	}
	return false
}

func stringList(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Body is the skill's instructions: SKILL.md without its frontmatter.
func (s Skill) Body() (string, error) {
	data, err := os.ReadFile(s.Path)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", s.Name, err)
	}
	_, body, _ := split(string(data))
	return strings.TrimSpace(body), nil
}

// Summary is nanobot's XML list of the skills for the system prompt ("" for
// none).
func Summary(skills []Skill) string {
	if len(skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("<skills>\n")
	for _, s := range skills {
		fmt.Fprintf(&b, "  <skill available=\"%t\">\n    <name>%s</name>\n    <description>%s</description>\n    <location>%s</location>\n",
			s.Available(), escape(s.Name), escape(s.Description), escape(s.Path))
		if !s.Available() {
			fmt.Fprintf(&b, "    <requires>%s</requires>\n", escape(strings.Join(s.Missing, ", ")))
		}
		b.WriteString("  </skill>\n")
	}
	b.WriteString("</skills>")
	return b.String()
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Set gives the system prompt its skills, read again at most once a
// second, so that a skill the user adds is seen at the next turn.
type Set struct {
	Loader Loader
	// Warn receives the loader's warnings, each once; nil drops them.
	Warn func(msg string)

	mu     sync.Mutex
	at     time.Time
	skills []Skill
	warned map[string]bool
}

// Skills returns the current skills.
func (s *Set) Skills() []Skill {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.skills != nil && time.Since(s.at) < time.Second {
		return s.skills
	}
	skills, errs := s.Loader.Load()
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	for _, err := range errs {
		if msg := err.Error(); !s.warned[msg] && s.Warn != nil {
			s.warned[msg] = true
			s.Warn(msg)
		}
	}
	if skills == nil {
		skills = []Skill{}
	}
	s.skills, s.at = skills, time.Now()
	return skills
}

// Always is the "### Skill: name" bodies of the available always skills,
// joined as nanobot joins them ("" for none).
func (s *Set) Always() string {
	a, err := always(s.Skills())
	if err != nil && s.Warn != nil {
		s.Warn(err.Error())
	}
	return a
}

// always joins the bodies of the available always skills; a body that
// cannot be read is left out and reported.
func always(skills []Skill) (string, error) {
	var parts []string
	var errs []error
	for _, sk := range skills {
		if !sk.Always || !sk.Available() {
			continue
		}
		body, err := sk.Body()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		parts = append(parts, "### Skill: "+sk.Name+"\n\n"+body)
	}
	return strings.Join(parts, "\n\n---\n\n"), errors.Join(errs...)
}

// Summary is the XML summary of the skills ("" for none).
func (s *Set) Summary() string { return Summary(s.Skills()) }

// Prompt is the skills' part of the system prompt, nanobot's two sections
// ("# Active Skills" with the bodies of the available always skills, then
// "# Skills" with the summary), joined as the prompt's parts are; "" when
// there is no skill.
func Prompt(skills []Skill) (string, error) {
	var parts []string
	a, err := always(skills)
	if err != nil {
		return "", err
	}
	if a != "" {
		parts = append(parts, "# Active Skills\n\n"+a)
	}
	if sum := Summary(skills); sum != "" {
		parts = append(parts, "# Skills\n\nThe following skills extend your capabilities. To use a skill, read its SKILL.md file using the read_file tool.\nSkills with available=\"false\" need dependencies installed first - you can try installing them with apt/brew.\n\n"+sum)
	}
	return strings.Join(parts, "\n\n---\n\n"), nil
}
