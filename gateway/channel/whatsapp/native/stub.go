//go:build !whatsmeow

package native

import (
	"context"
	"io"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/whatsapp"
)

// Built reports whether this nb has the native mode.
const Built = false

// New fails: this nb has no native mode.
func New(whatsapp.Config, channel.Env) (channel.Channel, error) { return nil, ErrNotBuilt }

// Login fails: this nb has no native mode.
func Login(context.Context, whatsapp.Config, channel.Env, io.Writer) error { return ErrNotBuilt }
