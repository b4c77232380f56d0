package lualib_test

import (
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
