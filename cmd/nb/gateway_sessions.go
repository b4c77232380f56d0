package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/gateway/config"
	gwsession "github.com/nbots/nb/gateway/session"
)

// The gateway's chat sessions in the shared store (issue 24): with a
// PostgreSQL store (--store, NB_STORE, gateway.store) they live there,
// shared by replicas on several machines; else in the workspace's
// nanobot files, as always. nb gateway sessions import|export moves them.

// busNamespace is the namespace of a bus URL (default nb); it names the
// gateway's sessions in a store too.
func busNamespace(raw string) string {
	if raw == "" {
		return "nb"
	}
	_, o, err := jetstream.ParseURL(raw)
	if err != nil || o.Namespace == "" {
		return "nb"
	}
	return o.Namespace
}

// gatewaySessions opens the sessions of the gateway: in the shared store
// when one is open, under the namespace of its bus (sc, else NB_BUS or
// gateway.bus); else the workspace's files.
func (a *App) gatewaySessions(ctx context.Context, c *config.Config, sc *scaleOut, log *slog.Logger) (*gwsession.Manager, error) {
	if a.store == nil || !a.store.Shared {
		m, err := gwsession.NewManager(filepath.Join(c.Workspace, "sessions"))
		if err != nil {
			return nil, err
		}
		m.Warn = func(msg string) { log.Warn(msg) }
		log.Info("sessions", "in", m.Location())
		return m, nil
	}
	ns := busNamespace(a.gatewayBusURL("", c))
	if sc != nil {
		ns = sc.namespace
	}
	m, err := gwsession.NewStoreManager(a.store.Store, gwsession.Bot(ns))
	if err != nil {
		return nil, err
	}
	m.Warn = func(msg string) { log.Warn(msg) }
	log.Info("sessions", "in", m.Location(), "namespace", ns)
	if n := notImported(ctx, m, filepath.Join(c.Workspace, "sessions")); n > 0 {
		log.Warn(fmt.Sprintf("the workspace has %d session files that are not in the store: these conversations start afresh here; nb gateway sessions import moves them (docs/scale-out.md)", n))
	}
	return m, nil
}

// notImported counts the session files of dir whose sessions the store
// of m does not hold (a gateway that was given a store after running on
// its files).
func notImported(ctx context.Context, m *gwsession.Manager, dir string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) == 0 {
		return 0
	}
	infos, err := m.List(ctx)
	if err != nil {
		return 0 // the store's error shows at the first turn
	}
	stored := map[string]bool{}
	for _, in := range infos {
		stored[gwsession.FileName(in.Key)] = true
	}
	n := 0
	for _, f := range files {
		if !stored[filepath.Base(f)] {
			n++
		}
	}
	return n
}

// gatewaySessionsCommand is nb gateway sessions import|export.
func (a *App) gatewaySessionsCommand(ctx context.Context, args []string) error {
	verb := ""
	if len(args) > 0 {
		verb = args[0]
	}
	fs, f := a.gatewayFlagSet("nb gateway sessions", "nb gateway sessions import | export [flags]",
		"Moves the chat sessions between the workspace's files (sessions/*.jsonl,\nnanobot's) and the conversation store replicas share (docs/scale-out.md).\nnb gateway sessions import --help and export --help tell more.")
	switch verb {
	case "import":
		fs, f = a.gatewayFlagSet("nb gateway sessions import", "nb gateway sessions import [flags]",
			"Stores the workspace's session files (sessions/*.jsonl) in the shared store, each\nline as it is; a session the store holds already is left as it is. The files stay.")
	case "export":
		fs, f = a.gatewayFlagSet("nb gateway sessions export", "nb gateway sessions export [flags]",
			"Writes the sessions of the shared store into the workspace's sessions folder as\nnanobot's files, byte for byte as they were stored (the sessions before a /new as\n<file>.<time>.bak); an existing file is never overwritten.")
	}
	storeURL := fs.String("store", "", "the `URL` of the store: postgres://user:password@host:port/database (default: NB_STORE, else gateway.store)")
	namespace := fs.String("namespace", "", "the gateway's `name` in the store (default: the namespace of NB_BUS or gateway.bus, else nb)")
	rest := args
	if verb == "import" || verb == "export" {
		rest = args[1:]
	}
	if help, err := parseFlags(fs, rest); help || err != nil {
		return err
	}
	if verb != "import" && verb != "export" {
		return &usageError{msg: "nb gateway sessions: say import (files into the store) or export (the store into files)"}
	}
	c, err := a.loadGatewayConfig(f)
	if err != nil {
		return err
	}
	defer a.closeStore()
	if err := a.openStore(ctx, *storeURL); err != nil { // --store, else NB_STORE
		return err
	}
	if err := a.openStore(ctx, c.Gateway.Store); err != nil { // when neither names one
		return err
	}
	if a.store == nil || !a.store.Shared {
		return errors.New("nb gateway sessions " + verb + ": name the PostgreSQL store (--store, NB_STORE or gateway.store): without one the sessions are the workspace's files already")
	}
	ns := *namespace
	if ns == "" {
		ns = busNamespace(a.gatewayBusURL("", c))
	}
	m, err := gwsession.NewStoreManager(a.store.Store, gwsession.Bot(ns))
	if err != nil {
		return err
	}
	m.Warn = func(msg string) { fmt.Fprintln(a.Stderr, "nb: warning: "+msg) }
	dir := filepath.Join(c.Workspace, "sessions")
	if verb == "import" {
		st, err := m.ImportFiles(ctx, dir)
		if err == nil || st.Sessions > 0 {
			fmt.Fprintf(a.Stderr, "nb: imported %d sessions (%d lines) from %s into %s\n", st.Sessions, st.Lines, dir, m.Location())
		}
		if st.Skipped > 0 {
			fmt.Fprintf(a.Stderr, "nb: warning: %d sessions were already in the store: left as they were\n", st.Skipped)
		}
		return err
	}
	st, err := m.ExportFiles(ctx, dir)
	if err == nil || st.Sessions > 0 {
		fmt.Fprintf(a.Stderr, "nb: exported %d sessions (%d lines, %d earlier sessions as .bak files) from %s into %s\n", st.Sessions, st.Lines, st.Earlier, m.Location(), dir)
	}
	if st.Skipped > 0 {
		fmt.Fprintf(a.Stderr, "nb: warning: %d sessions have a file already: left as it was\n", st.Skipped)
	}
	return err
}
