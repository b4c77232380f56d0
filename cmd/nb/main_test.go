package main

import (
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
// environment variable that holds each one's address.
var fakes = map[string]func(providertest.Brain, *providertest.Recorder) http.Handler{
	"OPENAI_API_ADDRESS": func(b providertest.Brain, r *providertest.Recorder) http.Handler {
		s := openaitest.New(b)
		s.Recorder = r
		return s
	},
	"OLLAMA_API_ADDRESS": func(b providertest.Brain, r *providertest.Recorder) http.Handler {
		s := ollamatest.New(b)
		s.Recorder = r
		return s
	},
	"ANTHROPIC_API_ADDRESS": func(b providertest.Brain, r *providertest.Recorder) http.Handler {
		s := anthropictest.New(b)
		s.Recorder = r
		return s
	},
	"COHERE_API_ADDRESS": func(b providertest.Brain, r *providertest.Recorder) http.Handler {
		s := coheretest.New(b)
		s.Recorder = r
		return s
	},
	"GOOGLE_API_ADDRESS": func(b providertest.Brain, r *providertest.Recorder) http.Handler {
		s := googletest.New(b)
		s.Recorder = r
		return s
	},
	"MARITACA_API_ADDRESS": func(b providertest.Brain, r *providertest.Recorder) http.Handler {
		s := maritacatest.New(b)
		s.Recorder = r
		return s
	},
	"MISTRAL_API_ADDRESS": func(b providertest.Brain, r *providertest.Recorder) http.Handler {
		s := mistraltest.New(b)
		s.Recorder = r
		return s
	},
}

// TestScripts runs the command-line scripts in testdata/script. Each
// script gets its own fake providers: their replies come from
// $WORK/replies.json when the script writes one (else they echo), and the
// request bodies they receive are appended to $WORK/requests.jsonl.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			brain := providertest.FromFile(filepath.Join(env.WorkDir, "replies.json"))
			rec := &providertest.Recorder{File: filepath.Join(env.WorkDir, "requests.jsonl")}
			for variable, mk := range fakes {
				srv := httptest.NewServer(mk(brain, rec))
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
