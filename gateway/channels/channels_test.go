package channels

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nbots/nb/gateway/channel"
)

// TestBuiltin: every platform is registered once, under its section's key.
func TestBuiltin(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Builtin() {
		if f.Name == "" || f.New == nil {
			t.Errorf("factory %+v is incomplete", f)
		}
		if seen[f.Name] {
			t.Errorf("%s is registered twice", f.Name)
		}
		seen[f.Name] = true
	}
	for _, name := range []string{"telegram", "slack", "discord", "email", "matrix"} {
		if _, ok := Find(Builtin(), name); !ok {
			t.Errorf("%s is not registered", name)
		}
	}
	if _, ok := Find(Builtin(), "nosuch"); ok {
		t.Error("Find found a platform nb has not")
	}
}

// TestOfNamesTheWrongType: a section's value of the wrong type is named
// by its key, and the section's values (tokens) are not repeated.
func TestOfNamesTheWrongType(t *testing.T) {
	f, _ := Find(Builtin(), "telegram")
	_, err := f.New(json.RawMessage(`{"token":"123:SECRET","allowFrom":"x"}`), channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "allowFrom") || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("err = %v, want one naming allowFrom without the token", err)
	}
}
