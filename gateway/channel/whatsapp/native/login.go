//go:build whatsmeow

package native

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/skip2/go-qrcode"
	"go.mau.fi/whatsmeow"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/whatsapp"
)

// Login links the gateway's device to a phone: it prints each QR code
// WhatsApp issues on w until the phone scans one (Settings → Linked
// Devices → Link a device), then saves the device in the store. A device
// already linked is reported and kept.
func Login(ctx context.Context, cfg whatsapp.Config, env channel.Env, w io.Writer) error {
	log := logger{env.Log().With("channel", whatsapp.Name)}
	st, err := OpenStore(ctx, env, log.Sub("store"))
	if err != nil {
		return err
	}
	defer st.Close()
	dev, err := st.Device(ctx)
	if err != nil {
		return err
	}
	if dev.ID != nil {
		fmt.Fprintf(w, "WhatsApp is already linked as +%s (device store %s). To link another phone, unlink this device in WhatsApp (Linked Devices) and run this again.\n", dev.ID.User, st.Name)
		return nil
	}
	cl := whatsmeow.NewClient(dev, log.Sub("client"))
	qr, err := cl.GetQRChannel(ctx)
	if err != nil {
		return fmt.Errorf("whatsapp login: %w", err)
	}
	if err := cl.Connect(); err != nil {
		return fmt.Errorf("whatsapp login: connecting to WhatsApp: %w", err)
	}
	defer cl.Disconnect()
	return showQR(ctx, qr, w, func() string {
		if cl.Store.ID == nil {
			return ""
		}
		return cl.Store.ID.User
	})
}

// showQR prints the codes of qr on w until pairing ends; linked names
// the account once it succeeded.
func showQR(ctx context.Context, qr <-chan whatsmeow.QRChannelItem, w io.Writer, linked func() string) error {
	for {
		var item whatsmeow.QRChannelItem
		var ok bool
		select {
		case item, ok = <-qr:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			return errors.New("whatsapp login: WhatsApp ended the pairing without an answer: run it again")
		}
		switch item.Event {
		case whatsmeow.QRChannelEventCode:
			code, err := qrcode.New(item.Code, qrcode.Low)
			if err != nil {
				return fmt.Errorf("whatsapp login: drawing the QR code: %w", err)
			}
			fmt.Fprintf(w, "%s\nScan this code in WhatsApp: Settings → Linked Devices → Link a device (a new code comes in %s).\n", code.ToSmallString(false), item.Timeout)
		case whatsmeow.QRChannelSuccess.Event:
			fmt.Fprintf(w, "WhatsApp linked as +%s: start the gateway (nb gateway) with channels.whatsapp.native: true.\n", linked())
			return nil
		case whatsmeow.QRChannelTimeout.Event:
			return errors.New("whatsapp login: no code was scanned in time: run it again")
		case whatsmeow.QRChannelEventError:
			return fmt.Errorf("whatsapp login: pairing failed: %w", item.Error)
		default:
			return fmt.Errorf("whatsapp login: pairing failed: %s", item.Event)
		}
	}
}
