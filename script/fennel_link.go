package script

import (
	"errors"

	"github.com/nbots/nb/script/fennel"
)

func init() { fennelImpl = fennelLink{} }

// fennelLink compiles Fennel with script/fennel.
type fennelLink struct{}

func (fennelLink) compile(src Source, names []string, sandboxed bool, cacheDir string) (string, error) {
	file := src.File
	if file == "" {
		file = "fennel"
	}
	params := names
	if params == nil {
		params = []string{}
	}
	lua, err := fennel.Compile(src.Code, fennel.Options{
		Filename: file, Line: max(src.Line, 1), Column: 1, Sandboxed: sandboxed, Params: params,
	})
	if err != nil {
		ce := &CompileError{Lang: Fennel, File: file, Message: err.Error()}
		var fe *fennel.Error
		if errors.As(err, &fe) {
			ce.Line, ce.Message = fe.Line, fe.Msg
		}
		return "", ce
	}
	return lua, nil
}

func (fennelLink) runtimeLua() string { return fennel.RuntimeLua() }
