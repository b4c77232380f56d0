package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/nbots/nb/provider/anthropic/anthropictest"
	"github.com/nbots/nb/provider/cohere/coheretest"
	"github.com/nbots/nb/provider/google/googletest"
	"github.com/nbots/nb/provider/maritaca/maritacatest"
	"github.com/nbots/nb/provider/mistral/mistraltest"
	"github.com/nbots/nb/provider/ollama/ollamatest"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"nb": func() { os.Exit(Main()) },
	})
}

// fakes are the in-process provider fakes every script can reach, by the
// environment variable that holds each one's address. Each returns the
// fake and where its recorder goes.
var fakes = map[string]func(providertest.Brain) (http.Handler, **providertest.Recorder){
	"OPENAI_API_ADDRESS": func(b providertest.Brain) (http.Handler, **providertest.Recorder) {
		s := openaitest.New(b)
		return s, &s.Recorder
	},
	"OLLAMA_API_ADDRESS": func(b providertest.Brain) (http.Handler, **providertest.Recorder) {
		s := ollamatest.New(b)
		return s, &s.Recorder
	},
	"ANTHROPIC_API_ADDRESS": func(b providertest.Brain) (http.Handler, **providertest.Recorder) {
		s := anthropictest.New(b)
		return s, &s.Recorder
	},
	"COHERE_API_ADDRESS": func(b providertest.Brain) (http.Handler, **providertest.Recorder) {
		s := coheretest.New(b)
		return s, &s.Recorder
	},
	"GOOGLE_API_ADDRESS": func(b providertest.Brain) (http.Handler, **providertest.Recorder) {
		s := googletest.New(b)
		return s, &s.Recorder
	},
	"MARITACA_API_ADDRESS": func(b providertest.Brain) (http.Handler, **providertest.Recorder) {
		s := maritacatest.New(b)
		return s, &s.Recorder
	},
	"MISTRAL_API_ADDRESS": func(b providertest.Brain) (http.Handler, **providertest.Recorder) {
		s := mistraltest.New(b)
		return s, &s.Recorder
	},
}

// TestScripts runs the command-line scripts in testdata/script. Each
// script gets its own fake providers: their replies come from
// $WORK/replies.json when the script writes one (else they echo), and the
// request bodies they receive are appended to $WORK/requests.jsonl.
func TestScripts(t *testing.T) {
	npmMCP, _ := filepath.Abs("../../.cache/npm/mcp")
	if _, err := os.Stat(filepath.Join(npmMCP, ".installed")); err != nil {
		t.Logf("SKIPPING the scripts that need npm packages (npm-mcp): run scripts/fetch-npm")
		npmMCP = ""
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		// [npm-mcp]: the MCP servers, SDK and Inspector of
		// testdata/npm/mcp are installed (scripts/fetch-npm), at $NPM_MCP.
		Condition: func(cond string) (bool, error) {
			if cond == "npm-mcp" {
				return npmMCP != "", nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("NPM_MCP", npmMCP)
			brain := providertest.FromFile(filepath.Join(env.WorkDir, "replies.json"))
			rec := &providertest.Recorder{File: filepath.Join(env.WorkDir, "requests.jsonl")}
			for variable, mk := range fakes {
				h, recorder := mk(brain)
				*recorder = rec
				srv := httptest.NewServer(h)
				env.Defer(srv.Close)
				env.Setenv(variable, srv.URL)
			}
			home := filepath.Join(env.WorkDir, "home")
			env.Setenv("HOME", home)
			for _, key := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "COHERE_API_KEY", "GOOGLE_API_KEY", "MARITACA_API_KEY", "MISTRAL_API_KEY"} {
				env.Setenv(key, "test-key")
			}
			env.Setenv("TERM", "dumb")
			return os.MkdirAll(home, 0o755)
		},
	})
}
