package script

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestFennel(t *testing.T) {
	r := New(Options{Sandboxed: true})
	tests := []struct {
		code   string
		params []Param
		want   any
	}{
		{"(.. \"```\" content \"```\")", []Param{{"content", "hi"}}, "```hi```"},
		{`(let [{: from : to} parameters] (math.random from to))`, []Param{{"parameters", map[string]any{"from": 3.0, "to": 3.0}}}, int64(3)},
		{`(.. id " | " name " | " parameters-as-json)`, []Param{{"id", "c1"}, {"name", "n"}, {"parameters-as-json", "{}"}}, "c1 | n | {}"},
		{`(// 7 2)`, nil, int64(3)},
		{`[1 2 3]`, nil, []any{int64(1), int64(2), int64(3)}},
		{`(fennel.view parameters)`, []Param{{"parameters", map[string]any{"a": 1.0}}}, `{:a 1}`},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			got, err := r.Call(context.Background(), Source{Lang: Fennel, Code: tt.code, File: "bot.yml", Line: 4}, tt.params...)
			if err != nil {
				t.Fatal(err)
			}
			if s, ok := got.([]any); ok {
				if len(s) != 3 {
					t.Errorf("got %v", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
	// The sandbox holds at run time, whatever the compiler allowed.
	for _, code := range []string{`(os.execute "id")`, `(io.open "/etc/passwd")`, `((. _G :require) :os)`, `(load "return 1")`} {
		_, err := r.Call(context.Background(), Source{Lang: Fennel, Code: code, File: "bot.yml", Line: 4})
		if err == nil {
			t.Errorf("%s ran in the sandbox", code)
		}
	}
	// A compile error names the cartridge line.
	_, err := r.Call(context.Background(), Source{Lang: Fennel, Code: "(+ 1\n  (undefined-thing 2", File: "bot.yml", Line: 4})
	var ce *CompileError
	if !errors.As(err, &ce) || ce.File != "bot.yml" || ce.Line < 4 || !strings.HasPrefix(ce.Error(), "bot.yml:") {
		t.Errorf("compile error: %#v", err)
	}
}

// BenchmarkFennelAdapter is BenchmarkLuaAdapter in Fennel; compiled once
// and cached (goal: at most 1.5 times the Lua figure).
func BenchmarkFennelAdapter(b *testing.B) {
	r := New(Options{Sandboxed: true})
	src := Source{Lang: Fennel, Code: "(.. \"```\" content \"```\")", File: "bot.yml", Line: 12}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Call(ctx, src, Param{"content", "Hello! How may I assist you today?"}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFennelDiskCache: a compiled chunk is kept on disk and reused by a
// new Runtime (as by the next nb process).
func TestFennelDiskCache(t *testing.T) {
	dir := t.TempDir()
	src := Source{Lang: Fennel, Code: "(.. \"<\" content \">\")", File: "bot.yml", Line: 3}
	for i := 0; i < 2; i++ {
		r := New(Options{Sandboxed: true, FennelCacheDir: dir})
		v, err := r.Call(context.Background(), src, Param{"content", "x"})
		if err != nil || v != "<x>" {
			t.Fatalf("run %d: %v %v", i, v, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("nothing cached in %s: %v", dir, err)
	}
}
