//go:build !whatsmeow

package native

import (
	"strings"
	"testing"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/whatsapp"
)

// Without the tag, native mode says which tag builds it.
func TestNotBuilt(t *testing.T) {
	if _, err := New(whatsapp.Config{Native: true}, channel.Env{}); err == nil || !strings.Contains(err.Error(), "-tags whatsmeow") {
		t.Errorf("New: %v", err)
	}
	if err := Login(t.Context(), whatsapp.Config{Native: true}, channel.Env{}, nil); err == nil || !strings.Contains(err.Error(), "-tags whatsmeow") {
		t.Errorf("Login: %v", err)
	}
}
