package gatewayrun

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/nbots/nb/gateway/config"
	gwsession "github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/state/storeurl"
)

// The gateway's chat sessions in the shared store (issue 24): with a
// PostgreSQL store (--store, NB_STORE, gateway.store) they live there,
// shared by replicas on several machines; else in the workspace's
// nanobot files, as always. nb gateway sessions import|export moves them.

// openSessions opens the sessions of the gateway: in the shared store
// when there is one, under the namespace ns ("" is "nb"); else the
// workspace's files.
func openSessions(ctx context.Context, c *config.Config, store *storeurl.Store, ns string, log *slog.Logger) (*gwsession.Manager, error) {
	if store == nil || !store.Shared {
		m, err := gwsession.NewManager(filepath.Join(c.Workspace, "sessions"))
		if err != nil {
			return nil, err
		}
		m.Warn = func(msg string) { log.Warn(msg) }
		m.Legacy = c.NanobotSessions
		log.Info("sessions", "in", m.Location())
		return m, nil
	}
	if ns == "" {
		ns = "nb"
	}
	m, err := gwsession.NewStoreManager(store.Store, gwsession.Bot(ns))
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
