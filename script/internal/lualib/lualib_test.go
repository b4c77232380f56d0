package lualib_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/arnodel/golua/lib/base"
	"github.com/arnodel/golua/lib/packagelib"
	"github.com/arnodel/golua/lib/stringlib"
	rt "github.com/arnodel/golua/runtime"

	"github.com/nbots/nb/script/internal/lualib"
)

func TestLoadInstallsLibraries(t *testing.T) {
	r := rt.New(nil)
	lualib.Load(r, base.LibLoader, packagelib.LibLoader, stringlib.LibLoader)
	g := r.GlobalEnv()
	if g.Get(rt.StringValue("pairs")).IsNil() {
		t.Error("base's pairs is not in the global environment")
	}
	if _, ok := g.Get(rt.StringValue("string")).TryTable(); !ok {
		t.Error("the string library is not in the global environment")
	}
}

// nb must not link golua's golib (nor so text/template and plugin): its
// reflection kept code the binary never runs (bench/README.md, "Binary size").
func TestGolibNotLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/nbots/nb/cmd/nb").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v\n%s", err, out)
	}
	deps := "\n" + string(out)
	if !strings.Contains(deps, "\ngithub.com/arnodel/golua/runtime\n") {
		t.Fatal("nb does not link golua: is the script package wired?")
	}
	for _, p := range []string{"github.com/arnodel/golua/lib", "github.com/arnodel/golua/lib/golib", "text/template", "plugin"} {
		if strings.Contains(deps, "\n"+p+"\n") {
			t.Errorf("nb links %s", p)
		}
	}
}
