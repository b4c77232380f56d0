package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/robopage"
	"github.com/nbots/nb/tool"
)

// robopageTools loads the tools a cartridge's robopages key names
// (paths relative to the cartridge's folder; ~ and $VAR expanded).
// Broken pages are skipped; their problems are reported on stderr.
func robopageTools(ctx context.Context, c *cartridge.Cartridge, stderr io.Writer) ([]tool.Tool, error) {
	var out []tool.Tool
	base := ""
	if c.Path != "" {
		base = filepath.Dir(c.Path)
	}
	for _, ref := range c.Robopages() {
		tools, problems, err := robopage.LoadTools(ctx, robopage.ResolvePath(ref.Path, base), ref.Filter)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: robopages: %w", displayPath(c), ref.Line, err)
		}
		for _, p := range problems {
			if p.Severity == robopage.Error {
				fmt.Fprintf(stderr, "nb: warning: robopage skipped: %v\n", p)
			} else {
				fmt.Fprintf(stderr, "nb: warning: robopage: %v\n", p)
			}
		}
		out = append(out, tools...)
	}
	return out, nil
}
