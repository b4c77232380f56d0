// Package baseprompt writes the base layer of a coding agent's system
// prompt: who the model is, how to use the file and exec built-ins it has
// in its family's shape (apply_patch for OpenAI's models, edit_file with
// old_string for Anthropic's, replace for Google's, edit_file with
// old_text for the others), and how to work (read before editing, small
// exact edits, run the tests, report what changed). nb writes it for its
// own tools; it names only tools the agent has, and the arguments those
// tools take. It comes first in the system prompt, below (before) the
// environment block, the project's instructions and the cartridge's
// directive, which are more specific and win.
package baseprompt

import (
	"strings"

	"github.com/nbots/nb/builtin/files"
)

// Tools says which tools the agent has, by name.
type Tools func(name string) bool

// Text is the base prompt for an agent whose files group uses profile
// (its family's shape; ProfileAuto or "" when the agent has no files
// group) and that has the tools has says. It is "" for an agent with
// neither file nor exec built-ins: there is nothing to say about them.
func Text(profile files.Profile, has Tools) string {
	reads := has("read_file")
	edit := editTool(profile)
	edits := has(edit)
	writes := has("write_file")
	runs := has("exec")
	if !reads && !edits && !writes && !runs {
		return ""
	}
	var s []string
	s = append(s, "You are a coding agent run by nb. You work in the workspace described below, with the tools you are given; "+
		"the user sees what you write and the calls you make.")

	var look []string
	if has("list_dir") {
		look = append(look, "`list_dir` shows a folder")
	}
	if has("glob") {
		look = append(look, "`glob` finds files by name")
	}
	if has("grep") {
		look = append(look, "`grep` finds the lines that match a regular expression")
	}
	if reads {
		look = append(look, "`read_file` reads a file with numbered lines (`offset` and `limit` read a long one in parts)")
	}
	if len(look) > 0 {
		s = append(s, "Find your way before you change anything: "+strings.Join(look, "; ")+".")
	}
	if reads && (edits || writes) {
		s = append(s, "Read a file before you edit it, and edit from what you read, never from memory.")
	}
	if edits {
		s = append(s, editSentence(profile))
		s = append(s, "Keep each edit small and exact: change what the task needs and nothing around it; keep the file's style and indentation.")
	}
	if writes {
		s = append(s, "`write_file` writes a whole file: use it for new files, not to change a few lines of an existing one.")
	}
	if runs {
		s = append(s, "`exec` runs a shell command in the workspace (`timeout` in seconds for a long one). "+
			"Run the project's tests, build or linter after you change code, and read the failures before you change more.")
	}
	s = append(s, "Do what the task asks, no more; when it is unclear or a step would destroy work, ask instead of guessing.")
	end := "When you are done, say briefly what you changed (the files and why)"
	if runs {
		end += " and what the tests said"
	}
	s = append(s, end+".")
	return strings.Join(s, "\n")
}

// editTool is the name of the profile's tool for changing part of a file.
func editTool(p files.Profile) string {
	switch p {
	case files.ProfileOpenAI:
		return "apply_patch"
	case files.ProfileGemini:
		return "replace"
	}
	return "edit_file"
}

// editSentence tells how the profile's edit tool is used.
func editSentence(p files.Profile) string {
	switch p {
	case files.ProfileOpenAI:
		return "To change files, call `apply_patch` with one patch as `input`: *** Begin Patch, then *** Update File: PATH and hunks " +
			"(@@, then lines starting with a space for context, - for removed and + for added, three lines of context around each change), " +
			"*** Add File: PATH with + lines for a new file, *** Delete File: PATH, and *** End Patch."
	case files.ProfileAnthropic:
		return "To change a file, call `edit_file` with `path`, `old_string` (the exact text, copied from `read_file` without its line numbers, " +
			"with enough lines around it to occur once) and `new_string`; set `replace_all` to change every occurrence."
	case files.ProfileGemini:
		return "To change a file, call `replace` with `path`, `old_string` (the exact text, copied from `read_file` without its line numbers, " +
			"with enough lines around it to occur once) and `new_string`; set `expected_replacements` when it occurs more than once."
	}
	return "To change a file, call `edit_file` with `path`, `old_text` (the exact text, copied from `read_file` without its line numbers, " +
		"with enough lines around it to occur once) and `new_text`; set `replace_all` to change every occurrence."
}
