package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/nbots/nb/agents"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/server/agentsrv"
)

// agentCartridges are the agents of the server the scripts of
// testdata/agents talk to ($AGENTS_URL).
var agentCartridges = map[string]string{
	"Echo": `meta: {name: Echo, description: Echoes what it is told.}
safety: {tools: {confirmable: false}}
`,
	"Careful": `meta: {name: Careful, description: Asks before it deletes.}
tools:
  - name: delete-file
    parameters: {type: object, properties: {path: {type: string}}}
    lua: return "deleted " .. parameters.path
`,
	"Typed": `meta: {name: Typed}
agent:
  input-schema: {type: object, properties: {city: {type: string}}, required: [city]}
  output-schema: {type: object, properties: {temp: {type: number}}, required: [temp]}
`,
}

// TestAgentsScripts runs the scripts of nb agents against an agent
// server of the test's own, whose model is the OpenAI fake (replies from
// $WORK/replies.json when the script writes one, else echoes).
func TestAgentsScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/agents",
		Setup: func(env *testscript.Env) error {
			fake := openaitest.New(providertest.FromFile(filepath.Join(env.WorkDir, "replies.json")))
			fake.Recorder = &providertest.Recorder{File: filepath.Join(env.WorkDir, "requests.jsonl")}
			model := httptest.NewServer(fake)
			env.Defer(model.Close)
			var list []*agents.Agent
			for _, name := range []string{"Echo", "Careful", "Typed"} {
				src := agentCartridges[name] + fmt.Sprintf("provider:\n  id: openai\n  credentials: {address: %s, access-token: k}\n  settings: {model: gpt-4o}\n", model.URL)
				c, err := cartridge.Parse([]byte(src), name+".yml", cartridge.FormatYAML, nil)
				if err != nil {
					return err
				}
				b, err := bot.New(context.Background(), c, bot.Host{})
				if err != nil {
					return err
				}
				a, err := agents.FromCartridge(b)
				if err != nil {
					return err
				}
				list = append(list, a)
			}
			set, err := agents.NewSet(list...)
			if err != nil {
				return err
			}
			mux := http.NewServeMux()
			(&agentsrv.Handler{Runtime: agents.New(set)}).Register(mux)
			srv := httptest.NewServer(mux)
			env.Defer(srv.Close)
			env.Setenv("AGENTS_URL", srv.URL)
			// The same agents behind a token, as nb serve answers a
			// request without the right one: 401.
			guarded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer right-token" {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusUnauthorized)
					w.Write([]byte(`{"error":{"message":"a valid token is required","type":"authentication_error"}}`)) //nolint:errcheck // test server
					return
				}
				mux.ServeHTTP(w, r)
			}))
			env.Defer(guarded.Close)
			env.Setenv("GUARDED_URL", guarded.URL)
			// An address where nothing listens: a server started and stopped.
			gone := httptest.NewServer(http.NotFoundHandler())
			env.Setenv("GONE_URL", gone.URL)
			gone.Close()
			env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("NB_DOTENV", "0")
			return nil
		},
	})
}
