package channel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nbots/nb/netguard"
)

// Env is what the gateway gives every channel it builds.
type Env struct {
	// Workspace is the agent's workspace: inbound media are stored under
	// Workspace/media/<channel>/.
	Workspace string
	// StateDir holds the channel's receive position (Telegram's update
	// offset, an IMAP UID), one file per channel.
	StateDir string
	// OpenPosition, when set, keeps the receive positions somewhere else
	// than StateDir's files (the bus that replicas on several machines
	// share): it opens the named position, which starts from file's when
	// it has none yet. ctx is the receive loop's: it ends when the loop
	// stops (its replica lost the election).
	OpenPosition func(ctx context.Context, name string, file FileCursor) (Cursor, error)
	// Logger receives the channel's events, secrets redacted (nil: discard).
	Logger *slog.Logger
	// Guard checks every connection that fetches inbound media, as it does
	// web_fetch's; nil builds one from the system's resolver.
	Guard *netguard.Guard
	// MediaQuota bounds the bytes of Workspace/media, every channel's
	// media together: past it, the oldest files are removed each time
	// one is stored (0: DefaultMediaQuota).
	MediaQuota int64
	// NanobotDir is nanobot's data folder (~/.nanobot, or the folder of
	// the configuration when it is another instance's), where the
	// platforms nanobot reaches through its own helpers keep their files:
	// the WhatsApp bridge's token and media, Mochat's cursors.
	NanobotDir string
	// Postgres is the PostgreSQL URL of the gateway's store (--store,
	// NB_STORE, gateway.store), "" when it keeps files: a channel that
	// keeps a session of its own (WhatsApp's native mode) keeps it there.
	// It holds a password: never log it.
	Postgres string
}

// Log is the Env's logger, or one that discards.
func (e Env) Log() *slog.Logger {
	if e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger
}

// MediaDir is the folder, created if needed, where the named channel
// stores what people send it, with StoreMedia or SaveMedia: they keep
// the media folder within MediaQuota.
func (e Env) MediaDir(channel string) (string, error) {
	if e.Workspace == "" {
		return "", errors.New("no workspace to store media in")
	}
	root := filepath.Join(e.Workspace, "media")
	dir := filepath.Join(root, channel)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("media folder: %w", err)
	}
	setQuota(root, e.MediaQuota, e.Logger)
	return dir, nil
}

// Cursor is a channel's receive position (Telegram's update offset, an
// IMAP UID, Matrix's since token), saved so that a receive loop that
// starts again, here or on another replica, resumes where the last
// published message left off: no replay, no gap. Load and Save are
// atomic: a crash leaves the old position or the new one. ctx bounds
// the I/O of a position kept elsewhere than a file (the bus replicas
// share).
type Cursor interface {
	// Load returns the saved position, "" when there is none yet.
	Load(ctx context.Context) (string, error)
	// Save replaces the position. A position shared by replicas refuses
	// to move once another replica has taken it over (ErrPositionTaken):
	// the channel logs it and goes on, its receive loop about to stop.
	Save(ctx context.Context, pos string) error
	// String names where the position is kept, for messages.
	String() string
}

// ErrPositionTaken is Save's error when another replica has taken the
// position over since this one opened it: the saving replica lost its
// receive loop's election and must not move the position back.
var ErrPositionTaken = errors.New("another replica receives now and has taken the receive position over: not moving it back")

// FileCursor is a Cursor kept in one small file, replaced atomically.
type FileCursor struct {
	Path string
}

// Cursor opens the named channel's position for the receive loop
// running with ctx: where OpenPosition says when it is set, else the
// file <name>.cursor under StateDir.
func (e Env) Cursor(ctx context.Context, channel string) (Cursor, error) {
	file, err := e.FileCursor(channel)
	if err != nil || e.OpenPosition == nil {
		return file, err
	}
	c, err := e.OpenPosition(ctx, channel, file)
	if err != nil {
		return nil, err
	}
	return settled{c}, nil
}

// settled saves a position even when its receive loop is stopping: the
// message it moves past is already durable, and a save cut short by the
// shutdown (the loop's context cancelled) would have the replica elected
// next read that message again and answer it twice. A save that outlives
// its loop is bounded by positionSaveTime.
type settled struct{ Cursor }

// positionSaveTime bounds a position's save once its loop has stopped.
const positionSaveTime = 5 * time.Second

// Save implements Cursor.
func (c settled) Save(ctx context.Context, pos string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), positionSaveTime)
	defer cancel()
	return c.Cursor.Save(ctx, pos)
}

// FileCursor is the named channel's position file under StateDir.
func (e Env) FileCursor(channel string) (FileCursor, error) {
	if e.StateDir == "" {
		return FileCursor{}, errors.New("no state folder to keep the receive position in")
	}
	if err := os.MkdirAll(e.StateDir, 0o700); err != nil {
		return FileCursor{}, fmt.Errorf("state folder: %w", err)
	}
	return FileCursor{Path: filepath.Join(e.StateDir, channel+".cursor")}, nil
}

// String implements Cursor: the file's path.
func (c FileCursor) String() string { return c.Path }

// Load implements Cursor.
func (c FileCursor) Load(context.Context) (string, error) {
	b, err := os.ReadFile(c.Path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read receive position: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Save implements Cursor: the position is written to a temporary file,
// synced, then renamed over the old one.
func (c FileCursor) Save(_ context.Context, pos string) error {
	f, err := os.CreateTemp(filepath.Dir(c.Path), ".cursor-*")
	if err != nil {
		return fmt.Errorf("save receive position: %w", err)
	}
	defer os.Remove(f.Name()) //nolint:errcheck // gone after the rename
	_, err = f.WriteString(pos + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), c.Path)
	}
	if err != nil {
		return fmt.Errorf("save receive position: %w", err)
	}
	return nil
}

// Position opens the named channel's position for the receive loop
// running with ctx and reads it ("" when there is none yet).
func (e Env) Position(ctx context.Context, channel string) (Cursor, string, error) {
	c, err := e.Cursor(ctx, channel)
	if err != nil {
		return nil, "", err
	}
	pos, err := c.Load(ctx)
	return c, pos, err
}

// MediaClient is the HTTP client a channel fetches inbound media with:
// every connection goes through the egress guard (Env.Guard, or one from
// the system's resolver), which also admits the hosts named here (a
// platform server the operator configured, which may be private or on
// loopback). Redirects are not followed: the guard checks where a
// request goes, and a redirect would carry the request's credentials.
func (e Env) MediaClient(hosts ...string) *http.Client {
	guard := netguard.Guard{}
	if e.Guard != nil {
		guard = *e.Guard
		guard.AllowHosts = append([]string(nil), e.Guard.AllowHosts...)
	}
	for _, h := range hosts {
		guard.AllowHosts = append(guard.AllowHosts, strings.ToLower(h))
	}
	return &http.Client{
		Transport: &http.Transport{Proxy: nil, DialContext: guard.DialContext, TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 30 * time.Second},
		Timeout:   2 * time.Minute,
		CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			return fmt.Errorf("media redirected to %s: not followed", r.URL.Host)
		},
	}
}
