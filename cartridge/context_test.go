package cartridge

import (
	"strings"
	"testing"
)

func TestContextKey(t *testing.T) {
	for _, tc := range []struct {
		src       string
		defaultOn bool
		want      ContextSettings
		err       string
	}{
		{"meta: {}\n", false, ContextSettings{}, ""},
		{"meta: {}\n", true, ContextSettings{On: true, Environment: true}, ""},
		{"context: false\n", true, ContextSettings{}, ""},
		{"context: true\n", false, ContextSettings{On: true, Environment: true}, ""},
		{"context: {environment: false, project-docs: [AGENTS.md, CONTRIBUTING.md], budget: 4096}\n", false,
			ContextSettings{On: true, Docs: []string{"AGENTS.md", "CONTRIBUTING.md"}, Budget: 4096}, ""},
		{"context: {project-docs: false}\n", false, ContextSettings{On: true, Environment: true, Docs: []string{}}, ""},
		{"context: {enviroment: false}\n", false, ContextSettings{}, `bot.yml:1: context.enviroment: unknown setting`},
		{"context: 3\n", false, ContextSettings{}, `bot.yml:1: context: must be true, false or a mapping`},
	} {
		c, err := Parse([]byte(tc.src), "bot.yml", FormatYAML, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Context(tc.defaultOn)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil || got.On != tc.want.On || got.Environment != tc.want.Environment || got.Budget != tc.want.Budget ||
			(got.Docs == nil) != (tc.want.Docs == nil) || strings.Join(got.Docs, ",") != strings.Join(tc.want.Docs, ",") {
			t.Errorf("%q: %+v %v, want %+v", tc.src, got, err, tc.want)
		}
	}
}
