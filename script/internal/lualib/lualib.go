// Package lualib loads golua's standard libraries into a runtime.
//
// It does what golua's lib.LoadLibs does without importing golua's lib
// package, which imports every library golua has, golib among them:
// golib (reflection into Go values, plugins built with text/template)
// is never loaded by nb, yet importing it linked it, and its uses of
// reflect's Method and text/template's calls stopped the linker from
// dropping any exported method of any type in the binary (several MB of
// the release binary; bench/README.md, "Binary size").
package lualib

import (
	"github.com/arnodel/golua/lib/packagelib"
	rt "github.com/arnodel/golua/runtime"
)

// Load runs each loader on r, in order, installing its library in r's
// global environment. The libraries nb loads return no cleanup that
// matters before the runtime is dropped, so none is kept.
func Load(r *rt.Runtime, loaders ...packagelib.Loader) {
	for _, l := range loaders {
		l.Run(r)
	}
}
