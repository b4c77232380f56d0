package builtin

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/nbots/nb/builtin/remote"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/proc"
)

// remotes are the open connections to other machines, by what they were
// opened with: the bots of one process (a cartridge's, its sub-agents')
// share one connection per address.
var remotes = struct {
	sync.Mutex
	m map[string]*remote.Env
}{m: map[string]*remote.Env{}}

// openRemote connects to the machine of builtins.environment, after
// refusing the settings that only make sense on this one. resolve makes
// the known-hosts and identity files absolute (~ and the cartridge's
// folder).
func openRemote(c *cartridge.Cartridge, cfg *cartridge.Builtins, resolve func(key, p string) (string, error), environ []string) (*remote.Env, error) {
	fail := func(key, format string, args ...any) error {
		return &cartridge.Error{File: c.Path, Line: c.Line(key), Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	e := cfg.Environment
	if f := cfg.Files; f != nil {
		if f.Workspace != "." {
			return nil, fail("builtins.files.workspace", "the workspace is the folder of builtins.environment (%s): leave this setting out", e.URL)
		}
		if f.Anywhere {
			return nil, fail("builtins.files.anywhere", "cannot be true with builtins.environment: the file tools stay in the remote folder")
		}
	}
	if x := cfg.Exec; x != nil {
		switch {
		case x.Workspace != "":
			return nil, fail("builtins.exec.workspace", "commands run in the folder of builtins.environment (%s): leave this setting out", e.URL)
		case x.Sandbox == "on":
			return nil, fail("builtins.exec.sandbox", "cannot be on with builtins.environment: bubblewrap sandboxes commands on this machine, and these run on %s (set auto or off)", e.Host)
		case len(x.ReadOnly) > 0:
			return nil, fail("builtins.exec.read-only", "applies to bubblewrap on this machine, not to commands run over SSH: leave it out")
		case len(x.Writable) > 0:
			return nil, fail("builtins.exec.writable", "applies to bubblewrap on this machine, not to commands run over SSH: leave it out")
		}
	}
	rc := remote.Config{User: e.User, Host: e.Host, Port: e.Port, Dir: e.Path, Environ: environ}
	var err error
	if e.KnownHosts != "" {
		if rc.KnownHosts, err = resolve("builtins.environment", e.KnownHosts); err != nil {
			return nil, err
		}
	}
	if e.Identity != "" {
		if rc.Identity, err = resolve("builtins.environment", e.Identity); err != nil {
			return nil, err
		}
	}
	home, _ := proc.Lookup(environ, "HOME")
	sock, _ := proc.Lookup(environ, "SSH_AUTH_SOCK")
	key := strings.Join([]string{e.URL, rc.KnownHosts, rc.Identity, home, sock}, "\x00")
	remotes.Lock()
	defer remotes.Unlock()
	if env, ok := remotes.m[key]; ok {
		return env, nil
	}
	env, err := remote.Dial(context.Background(), rc)
	if err != nil {
		return nil, fail("builtins.environment", "%v", err)
	}
	remotes.m[key] = env
	return env, nil
}
