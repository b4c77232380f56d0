package cartridge

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// corpusRoot holds real cartridges written by other people
// (../../shared/corpus/SOURCES.md): each must load, or be rejected with its
// exact reason.
const corpusRoot = "../../shared/corpus/cartridges"

// corpusRejected are the corpus files that are not cartridges, with the
// message after "<path>" (the first line of the error).
var corpusRejected = map[string]string{
	// Provider call fixtures: a YAML sequence.
	"icebaker__ruby-nano-bots/spec/data/providers/openai/tools.yml": ":2: a cartridge must be a YAML mapping of keys (meta:, provider:, ...), but this file holds a list",
	"icebaker__ruby-nano-bots/spec/data/providers/google/tools.yml": ":2: a cartridge must be a YAML mapping of keys (meta:, provider:, ...), but this file holds a list",
	// Templates of gbaptista/nano-apps: tasks/generate-cartridge.clj
	// replaces the `{tools}` placeholder (a YAML mapping) with the apps'
	// tools. ion.yml is such a template too, not a finished cartridge.
	"gbaptista__nano-apps/cartridges/template.yml": ":10: tools: must be a list of tools (- name: …), not a mapping",
	"gbaptista__nano-apps/cartridges/ion.yml":      ":32: tools: must be a list of tools (- name: …), not a mapping",
	// An empty file.
	"b08x__flowbots/lib/cartridges/advanced_analysis_cartridge.yml": ": the file is empty: a cartridge needs at least a provider section",
	// A prompt: its yaml block has list-valued instructions.
	"b08x__flowbots/lib/cartridges/template_generator.md": ":45: behaviors.interaction.instruction: must be text, not a list",
	// Several files pasted into one: the root key behaviors repeats.
	"b08x__nano-bots/cartridges/@b08x/cartridges/assistants/team.yml": `:17:1: mapping key "behaviors" already defined at [2:1]`,
}

// corpusNoProvider are the corpus cartridges that load but name no
// provider (partial cartridges and defaults files), with the line
// RequireProvider reports.
var corpusNoProvider = map[string]string{
	"b08x__flowbots/lib/cartridges/cody.yml":                    "",
	"icebaker__ruby-nano-bots/spec/data/cartridges/affixes.yml": "",
	"icebaker__ruby-nano-bots/spec/data/cartridges/tools.yml":   "",
	"icebaker__ruby-nano-bots/spec/data/cartridges/block.md":    "",
	"icebaker__ruby-nano-bots/spec/data/cartridges/meta.md":     "",
	"icebaker__ruby-nano-bots/static/cartridges/default.yml":    ":32", // provider without id
}

// corpusWarnings are the warnings of the corpus cartridges: keys that are
// in no specification (provider.generationConfig belongs under settings;
// the others are the authors' own notes).
var corpusWarnings = map[string][]string{
	"b08x__nano-bots/cartridges/@b08x/cartridges/assistants/agileBloomMini.yml": {
		`:95: unknown key "provider.generationConfig" is ignored (known keys here: id, credentials, options, settings, timeouts)`,
	},
	"b08x__nano-bots/cartridges/@b08x/cartridges/assistants/antisteve.yml": {
		`:101: unknown key "provider.generationConfig" is ignored (known keys here: id, credentials, options, settings, timeouts)`,
	},
	"b08x__nano-bots/cartridges/@b08x/cartridges/generators/gitcommit.yml": {
		`:20: unknown key "behaviors.commit_message" is ignored (known keys here: interaction, boot)`,
		`:27: unknown key "behaviors.expertise" is ignored (known keys here: interaction, boot)`,
		`:70: unknown key "provider.generationConfig" is ignored (known keys here: id, credentials, options, settings, timeouts)`,
	},
	"b08x__nano-bots/cartridges/@b08x/cartridges/method_man.yaml": {
		`:86: unknown key "interfaces.analysis" is ignored (known keys here: input, output, tools, repl, eval)`,
	},
}

// TestCorpus loads every real cartridge of the corpus.
func TestCorpus(t *testing.T) {
	if _, err := os.Stat(corpusRoot); err != nil {
		t.Skipf("SKIPPING THE CORPUS CONFORMANCE TEST: %s is not here (%v)", corpusRoot, err)
	}
	var files []string
	err := filepath.WalkDir(corpusRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(corpusRoot, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	formats := map[Format]int{}
	var loaded, rejected, tools int
	providers := map[string]int{}
	seenRejected := map[string]bool{}
	seenNoProvider := map[string]bool{}
	for _, rel := range files {
		path := filepath.Join(corpusRoot, rel)
		format, err := FormatOf(path)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		formats[format]++
		c, err := Load(path, os.LookupEnv)
		if want, ok := corpusRejected[rel]; ok {
			seenRejected[rel] = true
			rejected++
			if err == nil {
				t.Errorf("%s loaded, want rejected: %s", rel, want)
				continue
			}
			if got, _, _ := strings.Cut(err.Error(), "\n"); got != path+want {
				t.Errorf("%s:\n got %s\nwant %s", rel, got, path+want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		loaded++
		var want []string
		for _, w := range corpusWarnings[rel] {
			want = append(want, path+w)
		}
		if diff := cmp.Diff(want, c.Warnings); diff != "" {
			t.Errorf("%s: warnings (-want +got):\n%s", rel, diff)
		}

		id := c.Provider().ID
		if line, ok := corpusNoProvider[rel]; ok {
			seenNoProvider[rel] = true
			err := c.RequireProvider()
			want := path + line + ": provider.id is missing: the cartridge does not say which provider to use"
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s: RequireProvider = %v, want %s…", rel, err, want)
			}
		} else if err := c.RequireProvider(); err != nil {
			t.Errorf("%s: %v", rel, err)
		} else if !contains(ProviderIDs, id) {
			t.Errorf("%s: provider %q", rel, id)
		} else {
			providers[id]++
		}

		for i, def := range c.Tools() {
			tools++
			if def.Spec.Name == "" || def.Source.Code == "" || def.Source.Line == 0 || !contains(Languages, def.Source.Lang) {
				t.Errorf("%s: tool %d: %+v", rel, i, def)
			}
		}
		for _, mode := range []Mode{REPL, Eval} {
			for _, dir := range []string{"input", "output"} {
				if src, err := c.Adapter(mode, dir); err != nil {
					t.Errorf("%s: %s %s adapter: %v", rel, mode, dir, err)
				} else if src != nil && src.Line == 0 {
					t.Errorf("%s: %s %s adapter: no line", rel, mode, dir)
				}
			}
			for _, action := range []ToolAction{Confirming, Executing, Responding} {
				if src, err := c.FeedbackAdapter(mode, action); err != nil {
					t.Errorf("%s: %s %s adapter: %v", rel, mode, action, err)
				} else if src != nil && src.Line == 0 {
					t.Errorf("%s: %s %s adapter: no line", rel, mode, action)
				}
			}
		}
	}

	for _, table := range []struct {
		name string
		want map[string]string
		seen map[string]bool
	}{{"rejected", corpusRejected, seenRejected}, {"without provider", corpusNoProvider, seenNoProvider}} {
		for rel := range table.want {
			if !table.seen[rel] {
				t.Errorf("%s: listed as %s, but not in the corpus", rel, table.name)
			}
		}
	}

	// Totals: a change in the corpus or in validation shows here.
	if formats[FormatYAML] != 130 || formats[FormatMarkdown] != 5 {
		t.Errorf("files: %d YAML, %d Markdown; want 130 and 5", formats[FormatYAML], formats[FormatMarkdown])
	}
	if loaded != 128 || rejected != 7 {
		t.Errorf("%d loaded, %d rejected; want 128 and 7", loaded, rejected)
	}
	wantProviders := map[string]int{"cohere": 50, "openai": 44, "google": 14, "mistral": 6, "anthropic": 4, "maritaca": 3, "ollama": 1}
	if diff := cmp.Diff(wantProviders, providers); diff != "" {
		t.Errorf("providers (-want +got):\n%s", diff)
	}
	if tools != 15 {
		t.Errorf("%d tools, want 15", tools)
	}
	t.Logf("%d files (%d YAML, %d Markdown): %d loaded, %d rejected; providers %v; %d tools",
		len(files), formats[FormatYAML], formats[FormatMarkdown], loaded, rejected, providers, tools)
}
