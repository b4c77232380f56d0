package gatewayrun

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/nbots/nb/gateway/config"
)

// Lock is a running gateway's hold on its workspace and on the accounts
// of its enabled channels (a Telegram bot's token, a mailbox), so that a
// second gateway on either is refused at start instead of answering each
// message a second time. Each is a file in the state folder holding the
// holder's pid and listen address, flock-held while it runs: a gateway
// that crashed holds nothing, whatever its file still says. A gateway
// alone holds them exclusively; replicas of one gateway (--bus) hold them
// shared, so they start beside each other but not beside a gateway alone.
type Lock struct {
	files []*os.File
	owner lockOwner
}

// lockOwner is what a lock file says.
type lockOwner struct {
	PID     int    `json:"pid"`
	Address string `json:"address,omitempty"`
	Replica bool   `json:"replica,omitempty"`
}

// LockedError is a workspace or account another gateway holds.
type LockedError struct {
	// What is held: "the workspace /path" or "the account of channels.telegram".
	What string
	// PID and Address are the holder's (0 and "" when its file says nothing yet).
	PID     int
	Address string
	// Replica is true when the holder is a replica on a bus.
	Replica bool
}

func (e *LockedError) Error() string {
	who := "another nb gateway"
	if e.Replica {
		who = "a replica of nb gateway on a bus"
	}
	if e.PID != 0 {
		who += fmt.Sprintf(" (pid %d", e.PID)
		if e.Address != "" {
			who += ", listening on " + e.Address
		}
		who += ")"
	}
	hint := "stop it first, or run both as replicas with --bus (docs/scale-out.md)"
	if e.Replica {
		hint = "join it with the same --bus, or stop it first"
	}
	return fmt.Sprintf("%s already runs on %s: %s", who, e.What, hint)
}

// AcquireLock takes the locks of the gateway of c in the state folder
// stateDir: its workspace's (Files.Lock) and one per enabled channel
// whose section names an account. replica holds them shared (the
// gateway joins a bus). A lock another gateway holds is a *LockedError.
func AcquireLock(c *config.Config, stateDir string, replica bool) (*Lock, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	l := &Lock{owner: lockOwner{PID: os.Getpid(), Replica: replica}}
	if err := l.take(StateFiles(stateDir, c.Workspace).Lock, "the workspace "+c.Workspace); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(c.Channels.Each))
	for name := range c.Channels.Each {
		names = append(names, name)
	}
	slices.Sort(names) // always in the same order: two gateways never wait on each other's
	for _, name := range names {
		if cc, _ := c.Channels.Channel(name); !cc.Enabled {
			continue
		}
		account, ok := accountIdentity(name, c.Channels.Each[name])
		if !ok {
			continue
		}
		sum := sha256.Sum256([]byte(account)) // the file's name never shows a token
		path := filepath.Join(stateDir, "account-"+hex.EncodeToString(sum[:6])+".lock")
		if err := l.take(path, "the account of channels."+name); err != nil {
			l.Release()
			return nil, err
		}
	}
	return l, nil
}

// accountIdentity is channelAccount when the section names an account.
func accountIdentity(name string, raw json.RawMessage) (string, bool) {
	var section map[string]any
	if json.Unmarshal(raw, &section) != nil {
		return "", false
	}
	for _, k := range identityKeys {
		if v, ok := section[k]; ok && v != "" && v != nil {
			return channelAccount(name, raw), true
		}
	}
	return "", false
}

// take locks path, writing the owner in it.
func (l *Lock) take(path, what string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	how := syscall.LOCK_EX
	if l.owner.Replica {
		how = syscall.LOCK_SH
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%s: %w", path, err)
		}
		held := &LockedError{What: what}
		var o lockOwner
		if b, rerr := os.ReadFile(path); rerr == nil && json.Unmarshal(b, &o) == nil {
			held.PID, held.Address, held.Replica = o.PID, o.Address, o.Replica
		}
		return held
	}
	l.files = append(l.files, f)
	return l.write(f)
}

// write writes the owner in f.
func (l *Lock) write(f *os.File) error {
	b, _ := json.Marshal(l.owner)
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt(append(b, '\n'), 0)
	return err
}

// SetAddress writes the listen address in the lock files, for the
// message a second gateway gets.
func (l *Lock) SetAddress(addr string) error {
	l.owner.Address = addr
	for _, f := range l.files {
		if err := l.write(f); err != nil {
			return err
		}
	}
	return nil
}

// Release lets the locks go (the files stay: removing one could let two
// gateways lock two different files of one name).
func (l *Lock) Release() {
	if l == nil {
		return
	}
	for _, f := range l.files {
		f.Close() // closing the last descriptor unlocks
	}
	l.files = nil
}
