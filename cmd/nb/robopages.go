package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/robopage"
	"github.com/nbots/nb/tool"
)

// robopageTools loads the tools a cartridge's robopages key names.
// Broken pages are skipped with a warning naming them.
func robopageTools(ctx context.Context, c *cartridge.Cartridge) ([]tool.Tool, error) {
	var out []tool.Tool
	for _, ref := range c.Robopages() {
		path := ref.Path
		if strings.HasPrefix(path, "~/") {
			path = filepath.Join(os.Getenv("HOME"), path[2:])
		} else if !filepath.IsAbs(path) && c.Path != "" {
			path = filepath.Join(filepath.Dir(c.Path), path)
		}
		tools, problems, err := robopage.LoadTools(ctx, path, ref.Filter)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: robopages: %w", c.Path, ref.Line, err)
		}
		for _, p := range problems {
			fmt.Fprintf(os.Stderr, "nb: warning: robopage skipped: %v\n", p)
		}
		out = append(out, tools...)
	}
	return out, nil
}
