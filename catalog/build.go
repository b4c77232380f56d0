package catalog

import (
	"context"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
)

// Open loads the cartridge name as h finds it (a path, a name in the
// cartridge folders, "-" for the default) and builds its bot (see Build).
func Open(ctx context.Context, name string, h bot.Host, modes ...cartridge.Mode) (*cartridge.Cartridge, *bot.Bot, error) {
	c, err := h.Load(name)
	if err != nil {
		return nil, nil, err
	}
	b, err := Build(ctx, c, h, modes...)
	return c, b, err
}

// Build is the one way a front-end makes a runnable bot of a loaded
// cartridge: the cartridge's warnings go to h.Warn, then bot.New, then
// Bot.Ready for each of modes (eval and REPL when none is given), so a
// cartridge that cannot run fails here rather than at its first
// exchange. A bot that is not ready is closed; a panic in the runtime's
// constructors is returned as a *bot.PanicError.
func Build(ctx context.Context, c *cartridge.Cartridge, h bot.Host, modes ...cartridge.Mode) (b *bot.Bot, err error) {
	defer func() {
		if p := recover(); p != nil {
			b, err = nil, &bot.PanicError{Value: p}
		}
	}()
	if h.Warn != nil {
		for _, w := range c.Warnings {
			h.Warn(w)
		}
	}
	if len(modes) == 0 {
		modes = []cartridge.Mode{cartridge.Eval, cartridge.REPL}
	}
	b, err = bot.New(ctx, c, h)
	if err != nil {
		return nil, err
	}
	for _, m := range modes {
		if err = b.Ready(m); err != nil {
			b.Close() //nolint:errcheck // the error that matters is err
			return nil, err
		}
	}
	return b, nil
}
