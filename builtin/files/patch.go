package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"unicode"

	"github.com/nbots/nb/builtin/internal/arg"
	"github.com/nbots/nb/tool"
)

// ApplyPatch returns the apply_patch tool: OpenAI's models change files
// with a patch in the v4a format their own tools use. A patch is applied
// whole or not at all: when a hunk does not apply, nothing is written and
// the answer says which hunk failed and where the nearest lines are.
func ApplyPatch(w *Workspace) tool.Tool { return &applyPatch{w: w} }

type applyPatch struct{ w *Workspace }

func (t *applyPatch) Spec() tool.Spec {
	return tool.Spec{
		Name: "apply_patch",
		Description: "Change files of the workspace with a patch. The patch starts with *** Begin Patch and ends with *** End Patch; between them, " +
			"*** Add File: PATH followed by the new file's lines, each starting with +; *** Delete File: PATH; or *** Update File: PATH " +
			"(optionally followed by *** Move to: NEW_PATH) followed by hunks. A hunk starts with @@ (optionally followed by a line of the file " +
			"that comes before the change, such as a function's signature) and has lines starting with a space (context, unchanged), " +
			"- (removed) or + (added); give 3 lines of context before and after each change. Paths are relative to the workspace.",
		Parameters: applyPatchParams(),
	}
}

// applyPatchParams is apply_patch's schema, built once on first use: a spec's Parameters are read-only
// (tool.Spec), and a turn asks every tool for its spec.
var applyPatchParams = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type":       "object",
		"properties": map[string]any{"input": map[string]any{"type": "string", "description": "The whole patch, from *** Begin Patch to *** End Patch."}},
		"required":   []any{"input"},
	}
})

// OutputLimits: the attractor's 10,000 characters, tail kept.
func (t *applyPatch) OutputLimits() tool.Limits { return tool.Limits{Chars: 10_000, Tail: true} }

func (t *applyPatch) Run(ctx context.Context, call tool.Call) (any, error) {
	input, err := arg.String(call.Arguments, "input", true)
	if err != nil {
		return nil, err
	}
	ops, err := ParsePatch(input)
	if err != nil {
		return nil, err
	}
	return t.w.in(ctx).applyPatch(ops)
}

// PatchOp is one file operation of a patch.
type PatchOp struct {
	// Kind is "add", "delete" or "update".
	Kind string
	Path string
	// MoveTo is the new path of an updated file ("" when it stays).
	MoveTo string
	// Lines are an added file's lines.
	Lines []string
	Hunks []Hunk
	// Line is the op's line in the patch, for errors.
	Line int
}

// Hunk is one change of an updated file: the lines it expects (context
// and removed lines, in order) and the lines it leaves in their place.
type Hunk struct {
	// Hint is the text after @@: a line that comes before the change.
	Hint     string
	Old, New []string
	// EOF says the hunk ends at the file's end (*** End of File).
	EOF  bool
	Line int
}

// ParsePatch reads a v4a patch. A mistake names the patch's line.
func ParsePatch(text string) ([]PatchOp, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	// Models sometimes wrap the patch in a heredoc or a code fence.
	for len(lines) > 0 && strings.TrimSpace(lines[0]) != "*** Begin Patch" {
		if t := strings.TrimSpace(lines[0]); t != "" && !strings.HasPrefix(t, "```") && !strings.Contains(t, "<<") && t != "apply_patch" {
			return nil, fmt.Errorf("patch line 1: a patch starts with \"*** Begin Patch\", not %q", clipLine(lines[0]))
		}
		lines = lines[1:]
	}
	if len(lines) == 0 {
		return nil, errors.New("the patch has no \"*** Begin Patch\" line")
	}
	fail := func(i int, format string, args ...any) error {
		return fmt.Errorf("patch line %d: %s", i+1, fmt.Sprintf(format, args...))
	}
	var ops []PatchOp
	ended := false
	i := 1
	for i < len(lines) && !ended {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "*** End Patch":
			ended = true
			i++
		case strings.HasPrefix(l, "*** Add File: "):
			op := PatchOp{Kind: "add", Path: strings.TrimSpace(strings.TrimPrefix(l, "*** Add File: ")), Line: i + 1}
			i++
			for i < len(lines) && strings.HasPrefix(lines[i], "+") {
				op.Lines = append(op.Lines, lines[i][1:])
				i++
			}
			ops = append(ops, op)
		case strings.HasPrefix(l, "*** Delete File: "):
			ops = append(ops, PatchOp{Kind: "delete", Path: strings.TrimSpace(strings.TrimPrefix(l, "*** Delete File: ")), Line: i + 1})
			i++
		case strings.HasPrefix(l, "*** Update File: "):
			op := PatchOp{Kind: "update", Path: strings.TrimSpace(strings.TrimPrefix(l, "*** Update File: ")), Line: i + 1}
			i++
			if i < len(lines) && strings.HasPrefix(lines[i], "*** Move to: ") {
				op.MoveTo = strings.TrimSpace(strings.TrimPrefix(lines[i], "*** Move to: "))
				i++
			}
			for i < len(lines) && !strings.HasPrefix(lines[i], "*** ") || (i < len(lines) && strings.TrimSpace(lines[i]) == "*** End of File") {
				l := lines[i]
				switch {
				case strings.HasPrefix(l, "@@"):
					op.Hunks = append(op.Hunks, Hunk{Hint: strings.TrimSpace(strings.TrimPrefix(l, "@@")), Line: i + 1})
				case strings.TrimSpace(l) == "*** End of File":
					if len(op.Hunks) == 0 {
						return nil, fail(i, "*** End of File before any hunk")
					}
					op.Hunks[len(op.Hunks)-1].EOF = true
				default:
					if len(op.Hunks) == 0 {
						// A hunk without its @@ line: the first one may omit it.
						op.Hunks = append(op.Hunks, Hunk{Line: i + 1})
					}
					h := &op.Hunks[len(op.Hunks)-1]
					switch {
					case l == "":
						// An empty line is a context line whose space was lost.
						h.Old, h.New = append(h.Old, ""), append(h.New, "")
					case l[0] == ' ':
						h.Old, h.New = append(h.Old, l[1:]), append(h.New, l[1:])
					case l[0] == '-':
						h.Old = append(h.Old, l[1:])
					case l[0] == '+':
						h.New = append(h.New, l[1:])
					default:
						return nil, fail(i, "a hunk line starts with a space, - or +, not %q", clipLine(l))
					}
				}
				i++
			}
			for j := range op.Hunks {
				h := &op.Hunks[j]
				// Trailing empty context lines are usually the patch's own
				// blank lines, not the file's.
				for len(h.Old) > 0 && len(h.New) > 0 && h.Old[len(h.Old)-1] == "" && h.New[len(h.New)-1] == "" {
					h.Old, h.New = h.Old[:len(h.Old)-1], h.New[:len(h.New)-1]
				}
				if len(h.Old) == 0 && len(h.New) == 0 {
					return nil, fail(h.Line-1, "an empty hunk")
				}
			}
			if len(op.Hunks) == 0 && op.MoveTo == "" {
				return nil, fail(op.Line-1, "*** Update File: %s has no hunks", op.Path)
			}
			ops = append(ops, op)
		case strings.TrimSpace(l) == "":
			i++
		default:
			return nil, fail(i, "expected *** Add File:, *** Delete File:, *** Update File: or *** End Patch, not %q", clipLine(l))
		}
	}
	if !ended {
		return nil, errors.New("the patch has no \"*** End Patch\" line: send the whole patch")
	}
	if len(ops) == 0 {
		return nil, errors.New("the patch changes no file")
	}
	return ops, nil
}

func clipLine(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// applyPatch computes every file's new content first and writes only when
// all hunks apply.
func (w *Workspace) applyPatch(ops []PatchOp) (string, error) {
	type write struct {
		path    string
		content string
		mode    fs.FileMode
		remove  string // a file to remove after the writes (moved or deleted)
	}
	var writes []write
	var summary []string
	for _, op := range ops {
		switch op.Kind {
		case "add":
			if _, existed, err := w.target(op.Path); err != nil {
				return "", err
			} else if existed {
				return "", fmt.Errorf("*** Add File: %s: the file exists already; use *** Update File: to change it", op.Path)
			}
			writes = append(writes, write{path: op.Path, content: strings.Join(op.Lines, "\n") + "\n", mode: 0o644})
			summary = append(summary, "A "+op.Path)
		case "delete":
			if _, _, err := w.readText(op.Path, "apply_patch"); err != nil {
				return "", fmt.Errorf("*** Delete File: %s: %v", op.Path, err)
			}
			writes = append(writes, write{remove: op.Path})
			summary = append(summary, "D "+op.Path)
		case "update":
			content, mode, err := w.readText(op.Path, "apply_patch")
			if err != nil {
				return "", fmt.Errorf("*** Update File: %s: %v", op.Path, err)
			}
			updated, err := applyHunks(op, content)
			if err != nil {
				return "", err
			}
			target := op.Path
			if op.MoveTo != "" {
				target = op.MoveTo
				if _, _, err := w.target(target); err != nil {
					return "", err
				}
				writes = append(writes, write{path: target, content: updated, mode: mode, remove: op.Path})
				summary = append(summary, "M "+op.Path+" -> "+target)
				continue
			}
			writes = append(writes, write{path: target, content: updated, mode: mode})
			summary = append(summary, "M "+op.Path)
		}
	}
	for _, wr := range writes {
		if wr.path != "" {
			if err := w.writeAtomic(wr.path, []byte(wr.content), wr.mode); err != nil {
				return "", err
			}
		}
		if wr.remove != "" {
			if err := w.remove(wr.remove); err != nil {
				return "", err
			}
		}
	}
	return "Done. The patch changed:\n" + strings.Join(summary, "\n"), nil
}

// applyHunks applies an update's hunks in order, each after the previous.
func applyHunks(op PatchOp, content string) (string, error) {
	crlf := strings.Contains(content, "\r\n")
	if crlf {
		content = strings.ReplaceAll(content, "\r\n", "\n")
	}
	trailing := strings.HasSuffix(content, "\n")
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	if content == "" {
		lines = nil
	}
	from := 0
	for n, h := range op.Hunks {
		start := from
		if h.Hint != "" {
			if at := findLines(lines, []string{h.Hint}, from, false); at >= 0 {
				start = at + 1
			} else if at := findLines(lines, []string{h.Hint}, from, true); at >= 0 {
				start = at + 1
			}
		}
		at := -1
		if len(h.Old) == 0 {
			at = len(lines) // a pure addition goes at the end (or after the hint)
			if h.Hint != "" && start > from {
				at = start
			}
		} else {
			if h.EOF {
				if e := len(lines) - len(h.Old); e >= start && matchAt(lines, h.Old, e, false) {
					at = e
				}
			}
			if at < 0 {
				at = findLines(lines, h.Old, start, false)
			}
			if at < 0 {
				at = findLines(lines, h.Old, start, true)
			}
			if at < 0 && start > from {
				at = findLines(lines, h.Old, from, true)
			}
		}
		if at < 0 {
			return "", hunkError(op, n, h, lines)
		}
		rest := append([]string(nil), lines[at+len(h.Old):]...)
		lines = append(append(lines[:at], h.New...), rest...)
		from = at + len(h.New)
	}
	out := strings.Join(lines, "\n")
	if trailing || len(lines) > 0 {
		out += "\n"
	}
	if crlf {
		out = strings.ReplaceAll(out, "\n", "\r\n")
	}
	return out, nil
}

// findLines finds want in lines at or after from; fuzzy compares lines
// without surrounding white space and with typographic punctuation made
// plain (models retype quotes and dashes).
func findLines(lines, want []string, from int, fuzzy bool) int {
	for i := max(from, 0); i+len(want) <= len(lines); i++ {
		if matchAt(lines, want, i, fuzzy) {
			return i
		}
	}
	return -1
}

func matchAt(lines, want []string, at int, fuzzy bool) bool {
	for j, w := range want {
		l := lines[at+j]
		if l == w {
			continue
		}
		if !fuzzy || normalize(l) != normalize(w) {
			return false
		}
	}
	return true
}

var plainPunctuation = strings.NewReplacer("\u2018", "'", "\u2019", "'", "\u201c", "\"", "\u201d", "\"", "\u2013", "-", "\u2014", "-", "\u2026", "...", "\u00a0", " ")

func normalize(s string) string {
	return strings.TrimFunc(plainPunctuation.Replace(s), unicode.IsSpace)
}

// hunkError says which hunk failed and shows the lines of the file that
// look most like what it expected, numbered as read_file numbers them.
func hunkError(op PatchOp, n int, h Hunk, lines []string) error {
	best, score := -1, 0
	for i := 0; i+len(h.Old) <= len(lines) || (i < len(lines) && i == 0); i++ {
		s := 0
		for j := 0; j < len(h.Old) && i+j < len(lines); j++ {
			if normalize(lines[i+j]) == normalize(h.Old[j]) {
				s++
			}
		}
		if s > score {
			best, score = i, s
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*** Update File: %s: hunk %d (patch line %d) does not apply: these lines were not found in order:\n", op.Path, n+1, h.Line)
	for _, l := range h.Old {
		b.WriteString("  " + l + "\n")
	}
	if best < 0 {
		b.WriteString("No line of the file matches any of them. Read the file again (read_file) and make the patch from its current content. Nothing was changed.")
		return errors.New(b.String())
	}
	fmt.Fprintf(&b, "The nearest lines of %s (%d of %d lines match):\n", op.Path, score, len(h.Old))
	for i := max(best-1, 0); i < min(best+len(h.Old)+1, len(lines)); i++ {
		fmt.Fprintf(&b, "%6d| %s\n", i+1, lines[i])
	}
	b.WriteString("Nothing was changed: fix the hunk's context and - lines to match the file exactly, and send the whole patch again.")
	return errors.New(b.String())
}

// remove deletes a file of the workspace (a patch's deleted or moved file).
func (w *Workspace) remove(p string) error {
	name, err := w.path(p, true)
	if err != nil {
		return err
	}
	if err := w.root.Remove(name); err != nil {
		return w.pathError(p, err)
	}
	w.changed(name)
	return nil
}
