package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/catalog"
)

// DefaultID is the id of the built-in default cartridge.
const DefaultID = catalog.DefaultID

// Model is one cartridge the server serves (see catalog.Model).
type Model = catalog.Model

// Rescan looks for cartridges added, changed or removed in the folders
// and (re)builds their bots; the watcher calls it every WatchInterval.
// A cartridge that fails to load is logged once per change and listed
// with its error; it never stops the others.
func (s *Server) Rescan(ctx context.Context) { s.cat.Rescan(ctx) }

// filter lets through the cartridges the request's token may use.
func filter(ctx context.Context) catalog.Filter {
	tok := TokenFrom(ctx)
	if tok == nil || tok.Cartridges == nil {
		return nil
	}
	return tok.Allows
}

// Models lists the cartridges the request's token may use, sorted by id:
// the built-in default "-" (unless a cartridge with the id "default"
// takes its place), then every cartridge found in the folders, those that
// failed to load included (with Err set). The bots of the list are held
// until the request ends.
func (s *Server) Models(ctx context.Context) []Model {
	return s.cat.Models(filter(ctx), leasesFrom(ctx))
}

// Model returns what the server knows of the cartridge id, for listings:
// 404 when there is no such cartridge, 403 when the request's token may
// not use it. Unlike Bot, a cartridge that failed to load is no error.
func (s *Server) Model(ctx context.Context, id string) (Model, error) {
	m, err := s.cat.Model(id, filter(ctx))
	if err != nil {
		return Model{}, catalogError(err)
	}
	return m, nil
}

// Bot returns the bot of the cartridge id ("-" is the default cartridge),
// held until the request (or the run started with Admit) ends, so a
// cartridge changed on disk meanwhile never closes it under the exchange.
// Its errors are *Error: 404 for an unknown id, 403 when the request's
// token may not use it, 500 when the cartridge failed to load (with why).
func (s *Server) Bot(ctx context.Context, id string) (*bot.Bot, error) {
	m, err := s.cat.Bot(id, filter(ctx), leasesFrom(ctx))
	if err != nil {
		return nil, catalogError(err)
	}
	setCartridge(ctx, m.ID)
	return m.Bot, nil
}

// catalogError is a *catalog.Error in HTTP's terms.
func catalogError(err error) error {
	var ce *catalog.Error
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Kind {
	case catalog.NotFound:
		return &Error{Status: http.StatusNotFound, Code: "model_not_found",
			Message: fmt.Sprintf("there is no cartridge %q on this server: GET /cartridges (or /v1/models) lists them", ce.ID)}
	case catalog.NotAllowed:
		return &Error{Status: http.StatusForbidden, Code: "model_not_allowed",
			Message: fmt.Sprintf("this token may not use the cartridge %q", ce.ID)}
	case catalog.Broken:
		return &Error{Status: http.StatusInternalServerError, Err: ce.Err, Code: "cartridge_error",
			Message: fmt.Sprintf("the cartridge %q failed to load: %v", ce.ID, ce.Err)}
	}
	return &Error{Status: http.StatusServiceUnavailable, Message: ce.Error(), Err: err}
}

// loggerOr returns l, or a logger that drops everything.
func loggerOr(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
