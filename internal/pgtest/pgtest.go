// Package pgtest starts a throw-away PostgreSQL cluster for tests: the
// real server from the machine's packages (Debian's postgresql, which
// scripts/install-debian-packages installs), in a temporary folder, on a
// free loopback port, run as an unprivileged user (initdb refuses root:
// as root the cluster runs as the package's postgres user). Every test
// gets a database of its own. Tests call New; a package that uses it
// calls Main from its TestMain so the cluster stops when the tests end.
//
// Without PostgreSQL's programs the tests skip, loudly; with the
// environment variable CI set (as CI runs) they fail instead, so a CI
// machine that lost the package cannot pass by skipping.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/internal/pgpool"
)

// Cluster is a running throw-away PostgreSQL server.
type Cluster struct {
	dir      string // the data folder
	bin      string // the folder of pg_ctl and postgres
	port     int
	password string
	runAs    *user.User // nil: the current user
	dbs      atomic.Int64
}

// Options shape a cluster.
type Options struct {
	// Durable keeps fsync on, as a production server has it (benchmarks
	// of durable writes need it). Tests turn it off to run faster.
	Durable bool
}

var (
	shared     *Cluster
	sharedErr  error
	sharedOnce sync.Once
)

// Main runs a package's tests and stops the shared cluster afterwards:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

// New returns the URL of a new, empty database in the package's shared
// cluster (started on first use), or skips the test (fails it under CI)
// when PostgreSQL is not installed. The URL carries the cluster's
// password.
func New(t testing.TB) string {
	t.Helper()
	u, err := Shared(t).NewDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Durable starts a cluster of its own that syncs to the disk as
// production does (for benchmarks), stopped when the test ends, and
// returns the URL of a new database in it; it skips the test (fails it
// under CI) when PostgreSQL is not installed.
func Durable(t testing.TB) string {
	t.Helper()
	c, err := Start(Options{Durable: true})
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(c.Stop)
	u, err := c.NewDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Shared returns the package's shared cluster, starting it on first use,
// or skips the test like New.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = Start(Options{}) })
	if sharedErr != nil {
		unavailable(t, sharedErr)
	}
	return shared
}

// ErrNotInstalled says PostgreSQL's programs are not on this machine.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (initdb not found on PATH or in /usr/lib/postgresql/*/bin; scripts/install-debian-packages installs it)")

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("pgtest: %v", err)
	}
	t.Skipf("!!! SKIPPED: pgtest: %v", err)
}

// bindir finds the folder of initdb, pg_ctl and postgres.
func bindir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return filepath.Dir(p), nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		return "", ErrNotInstalled
	}
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	return filepath.Dir(found[0]), nil
}

// version is the major version in a /usr/lib/postgresql/<v>/bin path.
func version(p string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
	return v
}

// Start starts a new cluster. Stop removes it.
func Start(o Options) (*Cluster, error) {
	bin, err := bindir()
	if err != nil {
		return nil, err
	}
	reapOrphans(bin)
	c := &Cluster{bin: bin, password: randomHex(12)}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: running as root needs the postgres user that Debian's package creates: %w", err)
		}
		c.runAs = u
	}
	c.dir, err = os.MkdirTemp("", "nb-pgtest-")
	if err != nil {
		return nil, err
	}
	if err := c.chown(c.dir); err != nil {
		c.remove()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(c.dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		c.remove()
		return nil, err
	}
	pwfile := filepath.Join(c.dir, "pw")
	if err := os.WriteFile(pwfile, []byte(c.password+"\n"), 0o600); err != nil {
		c.remove()
		return nil, err
	}
	if err := c.chown(pwfile); err != nil {
		c.remove()
		return nil, err
	}
	data := filepath.Join(c.dir, "data")
	if out, err := c.run("initdb", "-D", data, "-U", "nb", "--auth=scram-sha-256", "--pwfile="+pwfile, "-E", "UTF8", "--locale=C"); err != nil {
		c.remove()
		return nil, fmt.Errorf("pgtest: initdb: %v: %s", err, out)
	}
	fsync := "off"
	if o.Durable {
		fsync = "on"
	}
	for range 5 {
		c.port, err = freePort()
		if err != nil {
			c.remove()
			return nil, err
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s -c fsync=%s -c max_connections=200 -c shared_buffers=32MB",
			c.port, c.dir, fsync)
		if o.Durable {
			opts += " -c synchronous_commit=on"
		} else {
			opts += " -c synchronous_commit=off -c full_page_writes=off"
		}
		out, err := c.run("pg_ctl", "-D", data, "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60", "-o", opts, "start")
		if err == nil {
			return c, nil
		}
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		if !strings.Contains(string(log), "in use") {
			c.remove()
			return nil, fmt.Errorf("pgtest: pg_ctl start: %v: %s\n%s", err, out, log)
		}
	}
	c.remove()
	return nil, fmt.Errorf("pgtest: no free port after five tries")
}

// reapOrphans stops the clusters of test processes that died without
// stopping theirs (killed by go test's timeout, say): each cluster's
// folder names its owner's pid.
func reapOrphans(bin string) {
	owners, _ := filepath.Glob(filepath.Join(os.TempDir(), "nb-pgtest-*", "owner"))
	for _, f := range owners {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil || pid <= 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		orphan := &Cluster{dir: filepath.Dir(f), bin: bin}
		if u, err := user.Lookup("postgres"); err == nil && os.Geteuid() == 0 {
			orphan.runAs = u
		}
		orphan.Stop()
	}
}

// URL is the address of database db, with the cluster's credentials.
func (c *Cluster) URL(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("nb", c.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Password is the cluster's password, for tests that check it is never
// printed.
func (c *Cluster) Password() string { return c.password }

// NewDatabase creates an empty database and returns its URL.
func (c *Cluster) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%s", c.dbs.Add(1), randomHex(4))
	if err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return c.URL(name), nil
}

// Exec runs SQL as the cluster's superuser in the postgres database:
// for tests that cut a replica off (pg_terminate_backend) or look inside.
func (c *Cluster) Exec(ctx context.Context, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cfg, err := pgpool.ParseConfig(c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgtest: connect: %w", err)
	}
	pool := pgpool.New(cfg)
	defer pool.Close()
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("pgtest: %s: %w", sql, err)
	}
	return nil
}

// Stop stops the server and removes its folder.
func (c *Cluster) Stop() {
	c.run("pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop") //nolint:errcheck // best effort
	c.remove()
}

func (c *Cluster) remove() { os.RemoveAll(c.dir) }

// run runs one of PostgreSQL's programs as the cluster's user.
func (c *Cluster) run(prog string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, prog), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C", "TZ=UTC"}
	cmd.Dir = c.dir
	if c.runAs != nil {
		uid, _ := strconv.Atoi(c.runAs.Uid)
		gid, _ := strconv.Atoi(c.runAs.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	return cmd.CombinedOutput()
}

func (c *Cluster) chown(p string) error {
	if c.runAs == nil {
		return nil
	}
	uid, _ := strconv.Atoi(c.runAs.Uid)
	gid, _ := strconv.Atoi(c.runAs.Gid)
	return os.Chown(p, uid, gid)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // never fails
	return hex.EncodeToString(b)
}
