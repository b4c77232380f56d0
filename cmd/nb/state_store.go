package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nbots/nb/cmd/nb/cliflag"
	"github.com/nbots/nb/server"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/storeurl"
	"github.com/nbots/nb/state/transfer"
)

// storeFlagDoc documents --store wherever it is taken.
const storeFlagDoc = cliflag.StoreDoc

// openStore opens the conversation store of flagValue, else of NB_STORE,
// once; with neither, conversations stay in each cartridge's files and
// nothing is opened.
func (a *App) openStore(ctx context.Context, flagValue string) error {
	raw := flagValue
	if raw == "" {
		raw = a.Getenv("NB_STORE")
	}
	if raw == "" || a.store != nil {
		return nil
	}
	o := storeurl.Options{Password: a.Getenv("NANO_BOTS_ENCRYPTION_PASSWORD")}
	if v := a.Getenv("NB_STORE_LEASE_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return fmt.Errorf("NB_STORE_LEASE_TTL %q: a duration of a second or more (15s by default)", v)
		}
		o.LeaseTTL = d
	}
	s, err := storeurl.Open(ctx, raw, o)
	if err != nil {
		return err
	}
	a.store = s
	return nil
}

// sharedStore is the store openStore opened, nil for the files.
func (a *App) sharedStore() state.Store {
	if a.store == nil {
		return nil
	}
	return a.store.Store
}

// closeStore closes what openStore opened.
func (a *App) closeStore() {
	if a.store != nil {
		a.store.Close()
		a.store = nil
	}
}

// storeName says where conversations are kept, for the log.
func (a *App) storeName() string {
	if a.store == nil {
		return "files"
	}
	return a.store.Name
}

// storeChecks are the readiness checks of the store: a replica that
// cannot reach it is not ready.
func (a *App) storeChecks() []server.Check {
	if a.store == nil || !a.store.Shared {
		return nil
	}
	return []server.Check{{Name: "store", Run: a.store.Ping}}
}

// isStateCommand tells nb state export|import from a cartridge named
// state (nb state KEY eval …).
func isStateCommand(args []string) bool {
	return len(args) >= 2 && args[0] == "state" && (args[1] == "export" || args[1] == "import") &&
		(len(args) < 3 || (args[2] != "eval" && args[2] != "repl" && args[2] != "state" && args[2] != "cartridge" && args[2] != "mcp"))
}

// stateTransfer runs nb state export|import [--store URL].
func (a *App) stateTransfer(args []string) error {
	export := args[0] == "export"
	var fs *cliflag.Set
	if export {
		fs = a.flags("nb state export", "nb state export [--store URL] > FILE", "Writes every conversation of the store (default: NB_STORE, else the state files)\nto standard output, one JSON line each (encrypted with NANO_BOTS_ENCRYPTION_PASSWORD\nwhen it is set). See docs/scale-out.md.")
	} else {
		fs = a.flags("nb state import", "nb state import [--store URL] < FILE", "Stores the conversations of an export read on standard input; those the store\nholds already are left as they are. See docs/scale-out.md.")
	}
	storeURL := fs.String("store", "", "the `URL` of the store: "+storeFlagDoc)
	if help, err := fs.ParseOnly(args[1:]); help || err != nil {
		return err
	}
	ctx := a.context()
	raw := *storeURL
	if raw == "" {
		raw = a.Getenv("NB_STORE")
	}
	s, err := storeurl.Open(ctx, raw, storeurl.Options{Password: a.Getenv("NANO_BOTS_ENCRYPTION_PASSWORD"), Root: state.RootFrom("", "", a.host().StateEnv())})
	if err != nil {
		return err
	}
	defer s.Close()
	var cipher *state.Cipher
	if pw := a.Getenv("NANO_BOTS_ENCRYPTION_PASSWORD"); pw != "" {
		cipher = state.NewCipher(pw)
	}
	if export {
		st, err := transfer.Export(ctx, s.Store, cipher, a.Stdout)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.Stderr, "nb: exported %d conversations (%d events, %d kept outputs) from %s\n", st.Conversations, st.Events, st.Outputs, s.Name)
		if st.Unreadable > 0 {
			fmt.Fprintf(a.Stderr, "nb: warning: %d conversations were left out: they cannot be read with this NANO_BOTS_ENCRYPTION_PASSWORD (another password, or damaged)\n", st.Unreadable)
		}
		return nil
	}
	st, err := transfer.Import(ctx, s.Store, cipher, a.Stdin)
	if err == nil || st.Conversations > 0 {
		fmt.Fprintf(a.Stderr, "nb: imported %d conversations (%d events, %d kept outputs) into %s\n", st.Conversations, st.Events, st.Outputs, s.Name)
	}
	if st.Skipped > 0 {
		fmt.Fprintf(a.Stderr, "nb: warning: %d conversations were already in the store: left as they were\n", st.Skipped)
	}
	return err
}
