// Package native is WhatsApp's native mode (channels.whatsapp.native,
// an nb extension): the gateway is itself a linked WhatsApp Web device,
// on go.mau.fi/whatsmeow, with no bridge and no Node. Its device keys
// and Signal sessions are kept in the gateway's store: PostgreSQL when
// the gateway has one (--store), else a SQLite file (pure Go) in the
// gateway's state folder.
//
// whatsmeow and its store weigh about 15 MB, more than the gateway's
// budget for all of nanobot's channels, so the mode is built only with
// the build tag whatsmeow (go build -tags whatsmeow ./cmd/nb); without
// it, New and Login say so.
package native

import "errors"

// ErrNotBuilt is what an nb built without the tag answers.
var ErrNotBuilt = errors.New("channels.whatsapp.native: this nb was built without WhatsApp's native mode (whatsmeow): build it with `CGO_ENABLED=0 go build -tags whatsmeow ./cmd/nb`, or use nanobot's bridge (native: false)")

// StoreFile is the SQLite file of the device under the state folder,
// when the gateway keeps files.
const StoreFile = "whatsapp-device.db"
