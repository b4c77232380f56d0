package layout

import (
	"os/exec"
	"strings"
	"testing"
)

// replaced are the packages nb stopped linking because they cost much and
// gave little (bench/README.md, "Binary size"): each took hundreds of KB
// of binary and work at every command's start. A new import that brings
// one back fails here, so it is a choice made again, not an accident. A
// path ending in "/..." is a module with every package under it; others
// are one package (goldmark's extension/ast, golua's lib/base stay).
var replaced = []struct{ pkg, why string }{
	{"maunium.net/go/mautrix/...", "the Matrix channel speaks the client-server API itself (gateway/channel/matrix)"},
	{"github.com/bwmarrin/discordgo/...", "the Discord channel has its own Gateway client (gateway/channel/discord)"},
	{"github.com/yuin/goldmark/extension", "the channels parse ~~strikethrough~~ and tables themselves (gateway/channel)"},
	{"github.com/arnodel/golua/lib", "script/internal/lualib loads the Lua libraries nb offers"},
	{"github.com/arnodel/golua/lib/golib", "nb never offers Lua access to Go values by reflection"},
	{"text/template", "only golua's golib linked it"},
	{"plugin", "only golua's golib linked it"},
	{"github.com/jackc/pgx/v5", "the PostgreSQL stores use internal/pgpool on pgx's pgconn"},
	{"github.com/jackc/pgx/v5/pgxpool", "internal/pgpool is the stores' pool"},
	{"github.com/jackc/puddle/v2/...", "only pgxpool linked it"},
	{"github.com/slack-go/slack/...", "the Slack channel speaks the Web API and Socket Mode itself (gateway/channel/slack)"},
	{"github.com/gorilla/websocket/...", "only slack-go linked it; nb's WebSockets are github.com/coder/websocket"},
	{"github.com/VictoriaMetrics/metrics/...", "internal/metric writes the Prometheus text format itself (registry.go, runtime.go, process_linux.go)"},
	{"github.com/valyala/histogram/...", "only VictoriaMetrics/metrics linked it"},
	{"github.com/valyala/fastrand/...", "only VictoriaMetrics/metrics linked it"},
}

// onlyImportedBy are packages nb links only because another imports
// them for little, the linker keeping almost nothing of them: pgx's
// pgconn imports pgtype for one constant (pgtype.TextFormatCode), so
// pgtype's initialisers stay (about 5 KB, and encoding/xml's, which
// pgtype imports) but none of its codecs, which nothing calls. A new
// importer would link them again.
var onlyImportedBy = map[string]string{
	"github.com/jackc/pgx/v5/pgtype": "github.com/jackc/pgx/v5/pgconn",
	"encoding/xml":                   "github.com/jackc/pgx/v5/pgtype",
}

// TestLinkedOnlyThrough: each package of onlyImportedBy has no importer
// in nb's binary but the one named.
func TestLinkedOnlyThrough(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}:{{range .Imports}} {{.}}{{end}}", module+"/cmd/nb").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		for _, imp := range strings.Fields(imports) {
			if by, ok := onlyImportedBy[imp]; ok {
				seen[imp] = true
				if pkg != by {
					t.Errorf("%s imports %s, which only %s may (it would link its code again)", pkg, imp, by)
				}
			}
		}
	}
	if !seen["github.com/jackc/pgx/v5/pgtype"] {
		t.Log("pgtype is no longer linked at all: its entry in onlyImportedBy can become one of replaced")
	}
}

// TestReplacedStayOut: nb's binary links none of the packages it replaced.
func TestReplacedStayOut(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"/cmd/nb").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := string(out)
	if !strings.Contains(deps, "\ngithub.com/yuin/goldmark\n") {
		t.Fatal("nb does not link goldmark: is go list's output read right?")
	}
	for _, line := range strings.Split(deps, "\n") {
		for _, r := range replaced {
			mod, whole := strings.CutSuffix(r.pkg, "/...")
			if line == r.pkg || whole && (line == mod || strings.HasPrefix(line, mod+"/")) {
				t.Errorf("nb links %s again: %s", line, r.why)
			}
		}
	}
}
