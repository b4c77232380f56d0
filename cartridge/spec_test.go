package cartridge

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

const specFile = "../../shared/spec/nano-bots-spec.md"

// TestSpecExamplesDoNotWarn: every YAML example of the specification
// loads without an unknown-key warning, so the known-key tree holds every
// key the specification defines. The "Full Specification" example lists
// several alternative provider sections under one key; each is loaded on
// its own.
func TestSpecExamplesDoNotWarn(t *testing.T) {
	spec, err := os.ReadFile(specFile)
	if err != nil {
		t.Skipf("SKIPPING: the specification is not at %s", specFile)
	}
	blocks := extractBlocks(spec)
	checked := 0
	for _, b := range blocks {
		if b.lang != "yaml" {
			continue
		}
		for _, src := range alternatives(b.text) {
			c, err := Parse(src, "spec.md", FormatYAML, nil)
			if err != nil {
				if strings.Contains(err.Error(), "already defined") || strings.Contains(err.Error(), "must be a YAML mapping") {
					t.Errorf("line %d: %v", b.fenceLine, err)
				}
				continue
			}
			if fragment(c) {
				continue // an adapter or a tool's source shown alone
			}
			checked++
			for _, w := range c.Warnings {
				t.Errorf("spec line %d: %s", b.fenceLine, w)
			}
		}
	}
	if checked < 40 {
		t.Errorf("only %d examples checked", checked)
	}
}

// fragment reports whether none of an example's top-level keys is a
// cartridge's.
func fragment(c *Cartridge) bool {
	for k := range c.Data {
		if contains(TopLevelKeys, k) {
			return false
		}
	}
	return true
}

// alternatives splits a YAML example whose top-level key repeats (the
// specification shows alternatives that way) into examples without the
// repetition; a repeated key below the top level likewise.
func alternatives(src []byte) [][]byte {
	lines := bytes.SplitAfter(src, []byte("\n"))
	seen := map[string]int{}
	for i, l := range lines {
		key := string(bytes.TrimRight(l, "\n"))
		if !strings.HasSuffix(key, ":") || strings.TrimLeft(key, " ") != key && !strings.HasPrefix(key, "  ") {
			continue
		}
		if prev, dup := seen[key]; dup {
			// Drop the earlier section: from its key to the next line at
			// the same or lower indentation.
			indent := len(key) - len(strings.TrimLeft(key, " "))
			end := prev + 1
			for end < len(lines) && (len(bytes.TrimSpace(lines[end])) == 0 || len(lines[end])-len(bytes.TrimLeft(lines[end], " ")) > indent) {
				end++
			}
			rest := append(append([][]byte{}, lines[:prev]...), lines[end:]...)
			return append(alternatives(bytes.Join(lines[:i], nil)), alternatives(bytes.Join(rest, nil))...)
		}
		seen[key] = i
	}
	return [][]byte{src}
}
