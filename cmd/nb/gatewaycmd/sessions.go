package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/nbots/nb/gateway/gatewayrun"
	gwsession "github.com/nbots/nb/gateway/session"
)

// gatewaySessionsCommand is nb gateway sessions import|export.
func (cl *cli) gatewaySessionsCommand(ctx context.Context, args []string) error {
	verb := ""
	if len(args) > 0 {
		verb = args[0]
	}
	fs, f := cl.gatewayFlagSet("nb gateway sessions", "nb gateway sessions import | export [flags]",
		"Moves the chat sessions between the workspace's files (sessions/*.jsonl,\nnanobot's) and the conversation store replicas share (docs/scale-out.md).\nnb gateway sessions import --help and export --help tell more.")
	switch verb {
	case "import":
		fs, f = cl.gatewayFlagSet("nb gateway sessions import", "nb gateway sessions import [flags]",
			"Stores the workspace's session files (sessions/*.jsonl) in the shared store, each\nline as it is; a session the store holds already is left as it is. The files stay.")
	case "export":
		fs, f = cl.gatewayFlagSet("nb gateway sessions export", "nb gateway sessions export [flags]",
			"Writes the sessions of the shared store into the workspace's sessions folder as\nnanobot's files, byte for byte as they were stored (the sessions before a /new as\n<file>.<time>.bak); an existing file is never overwritten.")
	}
	storeURL := fs.String("store", "", "the `URL` of the store: postgres://user:password@host:port/database (default: NB_STORE, else gateway.store)")
	namespace := fs.String("namespace", "", "the gateway's `name` in the store (default: the namespace of NB_BUS or gateway.bus, else nb)")
	rest := args
	if verb == "import" || verb == "export" {
		rest = args[1:]
	}
	if help, err := fs.ParseOnly(rest); help || err != nil {
		return err
	}
	if verb != "import" && verb != "export" {
		return &usageError{msg: "nb gateway sessions: say import (files into the store) or export (the store into files)"}
	}
	c, err := cl.loadGatewayConfig(f)
	if err != nil {
		return err
	}
	defer cl.closeStore()
	if err := cl.openStore(ctx, *storeURL); err != nil { // --store, else NB_STORE
		return err
	}
	if err := cl.openStore(ctx, c.Gateway.Store); err != nil { // when neither names one
		return err
	}
	if cl.store == nil || !cl.store.Shared {
		return errors.New("nb gateway sessions " + verb + ": name the PostgreSQL store (--store, NB_STORE or gateway.store): without one the sessions are the workspace's files already")
	}
	ns := *namespace
	if ns == "" {
		ns = gatewayrun.Namespace(cl.gatewayBusURL("", c))
	}
	m, err := gwsession.NewStoreManager(cl.store.Store, gwsession.Bot(ns))
	if err != nil {
		return err
	}
	m.Warn = func(msg string) { fmt.Fprintln(cl.stderr, "nb: warning: "+msg) }
	dir := filepath.Join(c.Workspace, "sessions")
	if verb == "import" {
		st, err := m.ImportFiles(ctx, dir)
		if err == nil || st.Sessions > 0 {
			fmt.Fprintf(cl.stderr, "nb: imported %d sessions (%d lines) from %s into %s\n", st.Sessions, st.Lines, dir, m.Location())
		}
		if st.Skipped > 0 {
			fmt.Fprintf(cl.stderr, "nb: warning: %d sessions were already in the store: left as they were\n", st.Skipped)
		}
		return err
	}
	st, err := m.ExportFiles(ctx, dir)
	if err == nil || st.Sessions > 0 {
		fmt.Fprintf(cl.stderr, "nb: exported %d sessions (%d lines, %d earlier sessions as .bak files) from %s into %s\n", st.Sessions, st.Lines, st.Earlier, m.Location(), dir)
	}
	if st.Skipped > 0 {
		fmt.Fprintf(cl.stderr, "nb: warning: %d sessions have a file already: left as it was\n", st.Skipped)
	}
	return err
}
