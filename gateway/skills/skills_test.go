package skills

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o700)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestNanobotAndOpenClawSkills loads skills written for nanobot (metadata
// as a JSON text, classic "key: value" lines YAML refuses) and OpenClaw
// (metadata.openclaw), a workspace skill shadowing a built-in one, and
// writes nanobot's prompt sections.
func TestNanobotAndOpenClawSkills(t *testing.T) {
	ws, builtin := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "skills", "weather", "SKILL.md"), `---
name: weather
description: Get current weather and forecasts (no API key required).
homepage: https://wttr.in/:help
metadata: {"nanobot":{"emoji":"🌤️","requires":{"bins":["curl"]}}}
---

# Weather

Use curl wttr.in/<city>.
`)
	write(t, filepath.Join(ws, "skills", "github", "SKILL.md"), "---\nname: github\ndescription: Use gh for issues & <PRs>\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"gh\"],\"env\":[\"GH_TOKEN\"]}}}\n---\nRun gh.\n")
	write(t, filepath.Join(ws, "skills", "memory", "SKILL.md"), "---\nname: memory\ndescription: Remember: facts go to MEMORY.md: always\nalways: true\n---\n\nWrite facts to memory/MEMORY.md.\n")
	write(t, filepath.Join(ws, "skills", "notes", "README.md"), "not a skill")
	write(t, filepath.Join(builtin, "memory", "SKILL.md"), "---\nname: memory\ndescription: built-in\n---\nbuilt-in body\n")
	write(t, filepath.Join(builtin, "tmux", "SKILL.md"), "no frontmatter at all\n")
	l := &Loader{Workspace: ws, Builtin: builtin,
		LookPath: func(b string) (string, error) {
			if b == "curl" {
				return "/usr/bin/curl", nil
			}
			return "", errors.New("not found")
		},
		Getenv: func(string) string { return "" },
	}
	skills, errs := l.Load()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), filepath.Join("memory", "SKILL.md")+": frontmatter: ") {
		t.Errorf("errors: %v", errs)
	}
	var names []string
	for _, s := range skills {
		names = append(names, s.Name+"/"+s.Source)
	}
	if got := strings.Join(names, " "); got != "github/workspace memory/workspace tmux/builtin weather/workspace" {
		t.Fatalf("skills: %s", got)
	}
	if skills[1].Description != "Remember: facts go to MEMORY.md: always" || !skills[1].Always {
		t.Errorf("classic frontmatter: %+v", skills[1])
	}
	p, err := Prompt(skills)
	if err != nil {
		t.Fatal(err)
	}
	gh := filepath.Join(ws, "skills", "github", "SKILL.md")
	want := "# Active Skills\n\n### Skill: memory\n\nWrite facts to memory/MEMORY.md.\n\n---\n\n# Skills\n\n" +
		"The following skills extend your capabilities. To use a skill, read its SKILL.md file using the read_file tool.\n" +
		"Skills with available=\"false\" need dependencies installed first - you can try installing them with apt/brew.\n\n" +
		"<skills>\n  <skill available=\"false\">\n    <name>github</name>\n    <description>Use gh for issues &amp; &lt;PRs&gt;</description>\n" +
		"    <location>" + gh + "</location>\n    <requires>CLI: gh, ENV: GH_TOKEN</requires>\n  </skill>\n"
	if !strings.HasPrefix(p, want) {
		t.Errorf("prompt:\n%s\nwant prefix\n%s", p, want)
	}
	if !strings.Contains(p, "<name>weather</name>") || !strings.Contains(p, "<skill available=\"true\">\n    <name>tmux</name>\n    <description>tmux</description>") {
		t.Errorf("prompt:\n%s", p)
	}
	if body, _ := skills[3].Body(); body != "# Weather\n\nUse curl wttr.in/<city>." {
		t.Errorf("body %q", body)
	}
}

// FuzzSkillFile: any SKILL.md is read without a panic, and its body is a
// suffix of the file.
func FuzzSkillFile(f *testing.F) {
	f.Add("---\nname: x\nmetadata: {\"nanobot\":{\"always\":true}}\n---\nbody")
	f.Add("---\nname: [unclosed\n---\n")
	f.Add("---\n---")
	f.Fuzz(func(t *testing.T, text string) {
		l := &Loader{LookPath: func(string) (string, error) { return "", nil }, Getenv: func(string) string { return "x" }}
		l.parse("dir", "/p/SKILL.md", "workspace", []byte(text))
		_, body, _ := split(text)
		norm := strings.TrimPrefix(strings.ReplaceAll(text, "\r\n", "\n"), "\ufeff")
		if !strings.HasSuffix(norm, body) {
			t.Errorf("body %q is not a suffix of %q", body, text)
		}
	})
}

// TestSet: the gateway's seam gives the same sections as Prompt.
func TestSet(t *testing.T) {
	ws := t.TempDir()
	write(t, filepath.Join(ws, "skills", "a", "SKILL.md"), "---\nname: a\ndescription: A\nalways: true\n---\nbody a\n")
	write(t, filepath.Join(ws, "skills", "b", "SKILL.md"), "---\nname: b\nmetadata: {\"nanobot\":{\"always\":true}}\n---\nbody b\n")
	s := &Set{Loader: Loader{Workspace: ws}}
	if got := s.Always(); got != "### Skill: a\n\nbody a\n\n---\n\n### Skill: b\n\nbody b" {
		t.Errorf("Always: %q", got)
	}
	if got := s.Summary(); !strings.HasPrefix(got, "<skills>\n  <skill available=\"true\">\n    <name>a</name>\n    <description>A</description>") {
		t.Errorf("Summary: %q", got)
	}
}

// TestNilGetenvSetsNoVariable: the loader reads no process environment of
// its own (an embedder's gateway gives it one), so a skill that needs a
// variable set in the process but not given is unavailable.
func TestNilGetenvSetsNoVariable(t *testing.T) {
	t.Setenv("NB_SKILLS_TEST_VAR", "set")
	l := &Loader{LookPath: func(string) (string, error) { return "", nil }}
	s, _ := l.parse("dir", "/p/SKILL.md", "workspace", []byte("---\nname: x\nrequires: {env: [NB_SKILLS_TEST_VAR]}\n---\nbody"))
	if len(s.Missing) != 1 || s.Missing[0] != "ENV: NB_SKILLS_TEST_VAR" {
		t.Errorf("Missing = %q, want the variable the loader was not given", s.Missing)
	}
}
