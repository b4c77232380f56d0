package main

import (
	"context"
	"net/http"

	"github.com/nbots/nb/catalog"
	"github.com/nbots/nb/internal/control"
	"github.com/nbots/nb/server"
)

// serveControl is nb serve's control page: besides what every control
// page shows, its cartridges with their load errors and its runs. srv is
// read at each poll (the page is made before the server).
func serveControl(srv **server.Server, tokens []*server.Token) http.Handler {
	return control.New(control.Options{Server: "nb serve", Tokens: tokens, Tables: func(ctx context.Context) []control.Table {
		s := *srv
		if s == nil {
			return nil
		}
		carts := control.Table{ID: "cartridges", Title: "Cartridges", Columns: []string{"id", "model", "file", "status"}}
		held := &catalog.Leases{}
		defer held.Release()
		for _, m := range s.Catalog().Models(nil, held) {
			model, status := "", "loaded"
			if m.Cartridge != nil {
				model = m.Cartridge.Provider().ID + " " + m.Cartridge.Provider().Model()
			}
			if m.Err != nil {
				status = m.Err.Error()
			}
			carts.Rows = append(carts.Rows, []any{m.ID, model, m.Path, status})
		}
		adm := s.Admission()
		runs := control.Table{ID: "runs", Title: "Runs", Columns: []string{"running", "waiting on their client", "limit"},
			Rows: [][]any{{adm.Active() - adm.Waiting(), adm.Waiting(), adm.Limits().MaxRuns}}}
		return []control.Table{carts, runs}
	}})
}
