//go:build whatsmeow

package native

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.mau.fi/whatsmeow/proto/waAdv"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/util/keys"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// roundTrip links a device in the store of env, with a Signal session,
// prekeys, an identity and a sender key, then opens the store again and
// reads them back.
func roundTrip(t *testing.T, env channel.Env) {
	ctx := context.Background()
	st, err := OpenStore(ctx, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := st.Device(ctx)
	if err != nil || dev.ID != nil {
		t.Fatalf("a new store's device: %v, %v", dev, err)
	}
	jid := types.NewADJID("15550000000", 0, 7)
	dev.ID = &jid
	dev.LID = types.NewJID("99990000", types.HiddenUserServer)
	dev.PushName = "nb"
	// What pairing leaves: the account's signed identity.
	dev.Account = &waAdv.ADVSignedDeviceIdentity{Details: []byte("details"), AccountSignature: make([]byte, 64), AccountSignatureKey: make([]byte, 32), DeviceSignature: make([]byte, 64)}
	if err := dev.Save(ctx); err != nil {
		t.Fatal(err)
	}
	session := []byte("signal session record")
	if err := dev.Sessions.PutSession(ctx, "15551234567.0", session); err != nil {
		t.Fatal(err)
	}
	pre, err := dev.PreKeys.GetOrGenPreKeys(ctx, 5)
	if err != nil || len(pre) != 5 {
		t.Fatalf("prekeys %d, %v", len(pre), err)
	}
	if err := dev.PreKeys.MarkPreKeysAsUploaded(ctx, pre[4].KeyID); err != nil {
		t.Fatal(err)
	}
	var ik [32]byte
	copy(ik[:], "identity key of 15551234567 .....")
	if err := dev.Identities.PutIdentity(ctx, "15551234567.0", ik); err != nil {
		t.Fatal(err)
	}
	if err := dev.SenderKeys.PutSenderKey(ctx, "120363@g.us", "15551234567.0", []byte("sender key")); err != nil {
		t.Fatal(err)
	}
	if err := dev.AppStateKeys.PutAppStateSyncKey(ctx, []byte("key-id"), store.AppStateSyncKey{Data: []byte("data"), Fingerprint: []byte("fp"), Timestamp: 42}); err != nil {
		t.Fatal(err)
	}
	noise, identity := *dev.NoiseKey.Priv, *dev.IdentityKey.Priv
	st.Close()

	st, err = OpenStore(ctx, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.Device(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == nil || *got.ID != jid || got.LID != dev.LID || got.PushName != "nb" || *got.NoiseKey.Priv != noise || *got.IdentityKey.Priv != identity {
		t.Fatalf("device read back: %+v", got)
	}
	if s, err := got.Sessions.GetSession(ctx, "15551234567.0"); err != nil || !bytes.Equal(s, session) {
		t.Errorf("session: %q, %v", s, err)
	}
	var k *keys.PreKey
	if k, err = got.PreKeys.GetPreKey(ctx, pre[2].KeyID); err != nil || k == nil || *k.Priv != *pre[2].Priv {
		t.Errorf("prekey: %v, %v", k, err)
	}
	if n, err := got.PreKeys.UploadedPreKeyCount(ctx); err != nil || n != 5 {
		t.Errorf("uploaded prekeys %d, %v", n, err)
	}
	if ok, err := got.Identities.IsTrustedIdentity(ctx, "15551234567.0", ik); err != nil || !ok {
		t.Errorf("identity trusted %v, %v", ok, err)
	}
	var other [32]byte
	if ok, _ := got.Identities.IsTrustedIdentity(ctx, "15551234567.0", other); ok {
		t.Error("another identity key is trusted")
	}
	if s, err := got.SenderKeys.GetSenderKey(ctx, "120363@g.us", "15551234567.0"); err != nil || string(s) != "sender key" {
		t.Errorf("sender key %q, %v", s, err)
	}
	if a, err := got.AppStateKeys.GetAppStateSyncKey(ctx, []byte("key-id")); err != nil || a == nil || a.Timestamp != 42 {
		t.Errorf("app state key %v, %v", a, err)
	}
}

func TestStoreFile(t *testing.T) {
	env := channel.Env{StateDir: filepath.Join(t.TempDir(), "channels")}
	roundTrip(t, env)
	info, err := os.Stat(filepath.Join(env.StateDir, StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("device store mode %v, want 0600: it holds the account's keys", info.Mode().Perm())
	}
}

func TestStorePostgres(t *testing.T) {
	url := pgtest.New(t)
	roundTrip(t, channel.Env{Postgres: url, StateDir: t.TempDir()})
}

// A store holding a second device is refused, not guessed at.
func TestStoreTwoDevices(t *testing.T) {
	ctx := context.Background()
	env := channel.Env{StateDir: t.TempDir()}
	st, err := OpenStore(ctx, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i, u := range []string{"15550000001", "15550000002"} {
		d := st.NewDevice()
		j := types.NewADJID(u, 0, uint8(i+1))
		d.ID = &j
		d.Account = &waAdv.ADVSignedDeviceIdentity{Details: []byte("d"), AccountSignature: make([]byte, 64), AccountSignatureKey: make([]byte, 32), DeviceSignature: make([]byte, 64)}
		if err := d.Save(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Device(ctx); err == nil {
		t.Error("two devices: no error")
	}
}
