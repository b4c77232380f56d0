package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/nbots/nb/gateway/channel"
)

// maxMailBytes is the largest mail read; a larger one is skipped, logged.
const maxMailBytes = 25 << 20

// loginError is the server's refusal of the credentials: final.
type loginError struct{ err error }

func (e *loginError) Error() string { return "IMAP login refused: " + e.err.Error() }

func finalIMAP(err error) error {
	var le *loginError
	if errors.As(err, &le) {
		return fmt.Errorf("email: %v: check channels.email.imapUsername and imapPassword", le.err)
	}
	return nil
}

// dialIMAP connects; newMail, if not nil, is signalled when the server
// announces a mailbox size (EXISTS), as it does during IDLE.
func (c *Channel) dialIMAP(ctx context.Context, newMail chan<- struct{}) (*imapclient.Client, error) {
	addr := net.JoinHostPort(c.cfg.IMAPHost, strconv.Itoa(c.cfg.IMAPPort))
	d := net.Dialer{Timeout: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("IMAP %s: %w", addr, err)
	}
	if on(c.cfg.IMAPUseSSL) {
		cfg := c.tlsConfig(c.cfg.IMAPHost)
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("IMAP %s: %w", addr, err)
		}
		conn = tc
	}
	opts := &imapclient.Options{}
	if newMail != nil {
		opts.UnilateralDataHandler = &imapclient.UnilateralDataHandler{Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			if d.NumMessages != nil {
				select {
				case newMail <- struct{}{}:
				default: // one signal pending is enough
				}
			}
		}}
	}
	return imapclient.New(conn, opts), nil
}

func (c *Channel) tlsConfig(host string) *tls.Config {
	if c.tls != nil {
		cfg := c.tls.Clone()
		cfg.ServerName = host
		return cfg
	}
	return &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
}

// session logs in, selects the mailbox and reads it until ctx ends or the
// connection fails: in IDLE, woken by the server's news of new mail,
// where the server supports it (and imapIdle is not false), else every
// pollIntervalSeconds.
func (c *Channel) session(ctx context.Context, in channel.Inbox, cursor channel.Cursor, pos *position, connected func()) error {
	newMail := make(chan struct{}, 1)
	client, err := c.dialIMAP(ctx, newMail)
	if err != nil {
		return err
	}
	defer client.Close()
	// A server that stops answering: closing the connection ends the
	// command that waits.
	watchdog := time.AfterFunc(c.timeout, func() { client.Close() })
	defer watchdog.Stop()
	stop := context.AfterFunc(ctx, func() { client.Close() })
	defer stop()
	if err := client.Login(c.cfg.IMAPUsername, c.cfg.IMAPPassword).Wait(); err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) {
			return &loginError{err}
		}
		return fmt.Errorf("IMAP login: %w", err)
	}
	sel, err := client.Select(c.cfg.IMAPMailbox, nil).Wait()
	if err != nil {
		return fmt.Errorf("IMAP select %s: %w", c.cfg.IMAPMailbox, err)
	}
	if sel.UIDValidity != pos.validity {
		if pos.validity != 0 {
			c.log.Warn("email: the mailbox's UIDVALIDITY changed: reading only mail that arrives from now on", "mailbox", c.cfg.IMAPMailbox)
		}
		next := uint32(sel.UIDNext)
		if next > 0 {
			next--
		}
		*pos = position{validity: sel.UIDValidity, uid: next}
		if err := cursor.Save(pos.String()); err != nil {
			return err
		}
	}
	idle := on(c.cfg.IMAPIdle) && client.Caps().Has(imap.CapIdle)
	if idle {
		c.log.Info("email: the server supports IDLE: new mail is read as it arrives", "mailbox", c.cfg.IMAPMailbox)
	}
	connected()
	for {
		watchdog.Reset(c.timeout)
		if err := c.fetchNew(ctx, client, in, cursor, pos); err != nil {
			return err
		}
		watchdog.Stop()
		if !idle {
			if !channel.Sleep(ctx, c.poll) {
				return nil
			}
			continue
		}
		if err := c.idle(ctx, client, watchdog, newMail); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// idle waits in IDLE until the server announces mail, idleRefresh
// passes, or ctx ends, then leaves IDLE (DONE) so commands can follow.
func (c *Channel) idle(ctx context.Context, client *imapclient.Client, watchdog *time.Timer, newMail <-chan struct{}) error {
	// NOOP first: a server sends at IDLE's start no news it held back.
	watchdog.Reset(c.timeout)
	if err := client.Noop().Wait(); err != nil {
		return fmt.Errorf("IMAP noop: %w", err)
	}
	watchdog.Stop()
	select {
	case <-newMail: // news from before: the search that follows reads it
		return nil
	default:
	}
	cmd, err := client.Idle()
	if err != nil {
		return fmt.Errorf("IMAP idle: %w", err)
	}
	t := time.NewTimer(c.idleRefresh)
	select {
	case <-newMail:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	watchdog.Reset(c.timeout) // a server that never ends the IDLE
	if err := cmd.Close(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("IMAP idle: %w", err)
	}
	return nil
}

// fetchNew hands over every mail after pos, in UID order, saving pos
// after each.
func (c *Channel) fetchNew(ctx context.Context, client *imapclient.Client, in channel.Inbox, cursor channel.Cursor, pos *position) error {
	data, err := client.UIDSearch(&imap.SearchCriteria{UID: []imap.UIDSet{{imap.UIDRange{Start: imap.UID(pos.uid + 1), Stop: 0}}}}, nil).Wait()
	if err != nil {
		return fmt.Errorf("IMAP search: %w", err)
	}
	var uids []imap.UID
	for _, u := range data.AllUIDs() {
		if uint32(u) > pos.uid { // "n:*" also matches the newest mail below n
			uids = append(uids, u)
		}
	}
	slices.Sort(uids)
	for _, uid := range uids {
		section := &imap.FetchItemBodySection{Peek: true}
		msgs, err := client.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, RFC822Size: true}).Collect()
		if err != nil {
			return fmt.Errorf("IMAP fetch: %w", err)
		}
		var raw []byte
		if len(msgs) == 1 && msgs[0].RFC822Size <= maxMailBytes {
			msgs, err = client.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
			if err != nil {
				return fmt.Errorf("IMAP fetch: %w", err)
			}
			if len(msgs) == 1 {
				raw = msgs[0].FindBodySection(section)
			}
		}
		if raw == nil {
			c.log.Warn("email: mail not read (gone, or larger than 25 MB)", "uid", uid)
		} else if m, why := c.parse(raw, fmt.Sprintf("%d:%d", pos.validity, uid)); why != "" {
			c.log.Info("email: not answered", "uid", uid, "why", why)
		} else if !channel.PublishDurably(ctx, in, m, c.log, c.retryBase) {
			return ctx.Err()
		}
		pos.uid = uint32(uid)
		if err := cursor.Save(pos.String()); err != nil {
			c.log.Error("email: saving the mailbox position", "err", err)
		}
		if on(c.cfg.MarkSeen) {
			if err := client.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close(); err != nil {
				return fmt.Errorf("IMAP store \\Seen: %w", err)
			}
		}
	}
	return nil
}
