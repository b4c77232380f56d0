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

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// QuarantineFlag is the keyword put on a mail refused for breaking a
// limit, so that the mailbox's owner finds it (search for the keyword);
// the receive position moves past it, so it is never parsed again.
const QuarantineFlag = imap.Flag("$NbQuarantined")

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
		if err := cursor.Save(ctx, pos.String()); err != nil {
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
		if err := c.fetchNew(ctx, client, watchdog, in, cursor, pos); err != nil {
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
// after each: a mail that cannot be handed over (refused, unreadable,
// over a limit) is passed, never read again.
func (c *Channel) fetchNew(ctx context.Context, client *imapclient.Client, watchdog *time.Timer, in channel.Inbox, cursor channel.Cursor, pos *position) error {
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
		watchdog.Reset(c.timeout) // the time a mail takes, not a batch
		m, why, refused, err := c.read(ctx, in, client, uid, fmt.Sprintf("%d:%d", pos.validity, uid))
		if err != nil {
			return err
		}
		flag := imap.FlagSeen
		switch {
		case refused != nil:
			var le *LimitError
			limit := ""
			if errors.As(refused, &le) {
				limit = le.Key
			}
			c.log.Warn("email: mail refused and quarantined: it is passed and never read again", "uid", uid, "limit", limit, "why", refused.Error(), "flag", string(QuarantineFlag))
			flag = QuarantineFlag
		case why != "":
			c.log.Info("email: not answered", "uid", uid, "why", why)
		default:
			if !channel.PublishDurably(ctx, in, m, c.log, c.retryBase) {
				return ctx.Err()
			}
		}
		if flag == QuarantineFlag {
			// Flagged before the position moves past it: a connection
			// lost in between reads it again (refused again, in one
			// bounded pass) rather than leaving it unflagged.
			if err := c.store(client, uid, flag); err != nil {
				return err
			}
		}
		pos.uid = uint32(uid)
		if err := cursor.Save(ctx, pos.String()); err != nil {
			c.log.Error("email: saving the mailbox position", "err", err)
		}
		if flag != QuarantineFlag && on(c.cfg.MarkSeen) {
			if err := c.store(client, uid, flag); err != nil {
				return err
			}
		}
	}
	return nil
}

// store adds flag to the mail uid. A server that refuses a keyword
// (QuarantineFlag) is logged: the position alone keeps the mail from
// being read again.
func (c *Channel) store(client *imapclient.Client, uid imap.UID, flag imap.Flag) error {
	err := client.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{flag}}, nil).Close()
	var ie *imap.Error
	if err != nil && flag == QuarantineFlag && errors.As(err, &ie) {
		c.log.Warn("email: the server refused the quarantine flag", "uid", uid, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("IMAP store %s: %w", flag, err)
	}
	return nil
}

// read reads one mail: its size and header first, and the rest only when
// the header admits it (refusal). It returns the message to hand over,
// or why it is not answered, or the error that refuses it (a
// *LimitError: quarantined); err is the connection's failure, or ctx's.
func (c *Channel) read(ctx context.Context, in channel.Inbox, client *imapclient.Client, uid imap.UID, key string) (m bus.Inbound, why string, refused, err error) {
	header := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, Peek: true, Partial: &imap.SectionPartial{Size: int64(c.limits.HeaderBytes) + 1}}
	msgs, err := client.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, RFC822Size: true, BodySection: []*imap.FetchItemBodySection{header}}).Collect()
	if err != nil {
		return m, "", nil, fmt.Errorf("IMAP fetch: %w", err)
	}
	if len(msgs) != 1 {
		return m, "gone from the mailbox", nil, nil
	}
	if size := msgs[0].RFC822Size; size > c.limits.MailBytes {
		return m, "", &LimitError{What: fmt.Sprintf("the mail has %d bytes", size), Key: "maxMailBytes", Limit: c.limits.MailBytes}, nil
	}
	hd, herr := c.readHead(msgs[0].FindBodySection(header))
	var le *LimitError
	switch {
	case errors.As(herr, &le):
		return m, "", herr, nil
	case herr != nil:
		return m, "unreadable header: " + herr.Error(), nil, nil
	}
	if why := c.refusal(in, hd, time.Now()); why != "" {
		return m, why, nil, nil
	}
	body := &imap.FetchItemBodySection{Peek: true}
	msgs, err = client.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{body}}).Collect()
	if err != nil {
		return m, "", nil, fmt.Errorf("IMAP fetch: %w", err)
	}
	var raw []byte
	if len(msgs) == 1 {
		raw = msgs[0].FindBodySection(body)
	}
	if raw == nil {
		return m, "gone from the mailbox", nil, nil
	}
	m, perr := c.parse(ctx, raw, key)
	if ctx.Err() != nil {
		return m, "", nil, ctx.Err()
	}
	return m, "", perr, nil
}
