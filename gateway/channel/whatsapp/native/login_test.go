//go:build whatsmeow

package native

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
)

// The QR codes WhatsApp issues are drawn on the terminal until one is
// scanned.
func TestShowQR(t *testing.T) {
	qr := make(chan whatsmeow.QRChannelItem, 3)
	qr <- whatsmeow.QRChannelItem{Event: whatsmeow.QRChannelEventCode, Code: "2@abc,def,ghi", Timeout: 60 * time.Second}
	qr <- whatsmeow.QRChannelItem{Event: whatsmeow.QRChannelEventCode, Code: "2@jkl,mno,pqr", Timeout: 20 * time.Second}
	qr <- whatsmeow.QRChannelSuccess
	var out strings.Builder
	if err := showQR(context.Background(), qr, &out, func() string { return "15550000000" }); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.Count(s, "Scan this code") != 2 || !strings.Contains(s, "█") || !strings.Contains(s, "linked as +15550000000") {
		t.Errorf("output:\n%s", s)
	}
	qr = make(chan whatsmeow.QRChannelItem, 1)
	qr <- whatsmeow.QRChannelTimeout
	if err := showQR(context.Background(), qr, &out, nil); err == nil || !strings.Contains(err.Error(), "no code was scanned") {
		t.Errorf("timeout: %v", err)
	}
}
