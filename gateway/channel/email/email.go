// Package email is the gateway's email channel: it polls a mailbox over
// IMAP, remembering the last UID it handed to the gateway (with the
// mailbox's UIDVALIDITY) so a restart neither replays nor skips mail, and
// answers over SMTP in the thread (In-Reply-To, References). It follows
// RFC 3834's rules for automatic responders: it never answers its own
// address, mail marked Auto-Submitted (other than "no"), mail with
// Precedence bulk, list or junk, mailing lists' and other responders'
// mail, or one mail twice, answers a correspondent at most
// maxRepliesPerHour times an hour, and marks its own mail
// "Auto-Submitted: auto-replied". It reads nobody's mail until
// channels.email.consentGranted is true, reads only the header of mail
// from senders allowFrom does not name, believes a From only as far as
// the receiving server's Authentication-Results vouch for it
// (authservId), and parses MIME in one linear pass within Limits.
//
// Identity: Inbound.SenderID and ChatID are the sender's address in lower
// case ("alice@example.com").
package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/channel"
)

// Name is the channel's configuration name, channels.email.
const Name = "email"

// Config is channels.email, nanobot's keys.
type Config struct {
	Enabled bool `json:"enabled"`
	// ConsentGranted must be true: the owner of the mailbox agrees that
	// nb reads it and answers from it.
	ConsentGranted bool `json:"consentGranted"`

	IMAPHost     string `json:"imapHost"`
	IMAPPort     int    `json:"imapPort,omitempty"`
	IMAPUsername string `json:"imapUsername"`
	IMAPPassword string `json:"imapPassword"`
	IMAPMailbox  string `json:"imapMailbox,omitempty"`
	// IMAPUseSSL is implicit TLS (port 993), the default; without it the
	// connection is plain text, allowed to a loopback host only.
	IMAPUseSSL *bool `json:"imapUseSsl,omitempty"`

	SMTPHost     string `json:"smtpHost"`
	SMTPPort     int    `json:"smtpPort,omitempty"`
	SMTPUsername string `json:"smtpUsername"`
	SMTPPassword string `json:"smtpPassword"`
	// SMTPUseTLS is STARTTLS (port 587), the default; SMTPUseSSL implicit
	// TLS (port 465). Neither: plain text, to a loopback host only.
	SMTPUseTLS *bool `json:"smtpUseTls,omitempty"`
	SMTPUseSSL bool  `json:"smtpUseSsl,omitempty"`

	// FromAddress is the mailbox's own address: the sender of answers,
	// and an address never answered.
	FromAddress string `json:"fromAddress"`
	// AutoReplyEnabled false reads mail but sends nothing (default true).
	AutoReplyEnabled *bool `json:"autoReplyEnabled,omitempty"`
	// IMAPIdle waits for new mail in IDLE where the server supports it
	// (default true); false polls.
	IMAPIdle *bool `json:"imapIdle,omitempty"`
	// PollIntervalSeconds is how often the mailbox is read without IDLE
	// (30 if 0).
	PollIntervalSeconds int `json:"pollIntervalSeconds,omitempty"`
	// MarkSeen flags handed-over mail \Seen (default true).
	MarkSeen *bool `json:"markSeen,omitempty"`
	// MaxMediaBytes bounds one attached file received (20 MB if 0).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
	// MaxBodyChars cuts a mail's text (12,000 if 0).
	MaxBodyChars int `json:"maxBodyChars,omitempty"`
	// SubjectPrefix starts an answer's subject ("Re: " if "").
	SubjectPrefix string `json:"subjectPrefix,omitempty"`
	// AllowFrom lists the addresses that may write to the assistant; the
	// gateway checks SenderID against it, and the channel reads only the
	// header of other senders' mail (their attachments are never
	// fetched).
	AllowFrom []string `json:"allowFrom"`

	// AuthservID (nb) names the receiving server whose
	// Authentication-Results fields are believed (its authserv-id, such
	// as "mx.google.com"): set, a mail is read only when that server
	// found DMARC passing, or SPF or DKIM passing for a domain aligned
	// with From's.
	AuthservID string `json:"authservId,omitempty"`
	// MaxMailBytes (nb) is the largest mail read (25 MB if 0).
	MaxMailBytes int64 `json:"maxMailBytes,omitempty"`
	// MaxMimeDepth (nb) is how deep MIME parts may nest (16 if 0).
	MaxMimeDepth int `json:"maxMimeDepth,omitempty"`
	// MaxMimeParts (nb) is how many MIME parts a mail may have (256 if 0).
	MaxMimeParts int `json:"maxMimeParts,omitempty"`
	// MaxHeaderBytes (nb) bounds a mail's header and each part's (100 KB
	// if 0).
	MaxHeaderBytes int `json:"maxHeaderBytes,omitempty"`
	// MaxRepliesPerHour (nb) is how many mails of one correspondent are
	// handed to the assistant, and how many answers mailed to them, in
	// any hour (10 if 0): an automatic responder the other rules miss
	// cannot keep a conversation going faster.
	MaxRepliesPerHour int `json:"maxRepliesPerHour,omitempty"`
}

func on(b *bool) bool { return b == nil || *b }

// Channel is one mailbox.
type Channel struct {
	// link is the receive loop's connection, for Status.
	link channel.Conn
	cfg  Config
	env  channel.Env
	log  *slog.Logger
	self string // FromAddress, lower case

	poll      time.Duration
	retryBase time.Duration
	// idleRefresh is the longest an IDLE waits before the mailbox is
	// searched anyway: a safety net for notifications that go missing.
	idleRefresh time.Duration
	timeout     time.Duration
	// tls configures both connections (tests trust their own CA).
	tls *tls.Config

	limits Limits

	mu sync.Mutex
	// threads are the mails handed over, by key: what an answer replies
	// to.
	threads threads
	replied *repliedSet
	// handed and answered count each correspondent's mails handed over
	// and answers mailed (maxRepliesPerHour).
	handed, answered perHour
}

// Status implements channel.Reporter: where the receive loop's
// connection is.
func (c *Channel) Status() channel.Status { return c.link.Status() }

// thread is what an answer needs of the mail it answers.
type thread struct {
	from       string // the correspondent's address
	messageID  string
	references string
	subject    string
}

// maxThreads is how many handed-over mails are remembered for answers.
const maxThreads = 10_000

// threads are the mails handed over by their key ("uid:UIDVALIDITY:UID"),
// and each correspondent's last.
type threads struct {
	byKey map[string]thread
	last  map[string]string // address -> key
	order []string
}

func (t *threads) add(key string, th thread) {
	if t.byKey == nil {
		t.byKey, t.last = map[string]thread{}, map[string]string{}
	}
	if _, ok := t.byKey[key]; !ok {
		t.order = append(t.order, key)
	}
	t.byKey[key] = th
	t.last[th.from] = key
	if len(t.order) > maxThreads {
		for _, k := range t.order[:len(t.order)-maxThreads] {
			if old := t.byKey[k]; t.last[old.from] == k {
				delete(t.last, old.from)
			}
			delete(t.byKey, k)
		}
		t.order = append([]string(nil), t.order[len(t.order)-maxThreads:]...)
	}
}

// find is the mail an answer to addr goes with: replyTo's when it is a
// mail of addr's, else addr's last mail.
func (t *threads) find(replyTo, addr string) (key string, th thread, ok bool) {
	if th, ok := t.byKey[replyTo]; ok && th.from == addr {
		return replyTo, th, true
	}
	key, ok = t.last[addr]
	return key, t.byKey[key], ok
}

// perHour counts each correspondent's events over the last hour.
type perHour struct {
	limit int
	times map[string][]time.Time
}

// allow says whether addr has had fewer than limit events in the hour
// before now.
func (p *perHour) allow(addr string, now time.Time) bool {
	return len(p.recent(addr, now)) < p.limit
}

func (p *perHour) recent(addr string, now time.Time) []time.Time {
	ts := p.times[addr]
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= time.Hour {
		i++
	}
	if i > 0 {
		ts = append(ts[:0], ts[i:]...)
		p.times[addr] = ts
	}
	return ts
}

func (p *perHour) add(addr string, now time.Time) {
	if p.times == nil {
		p.times = map[string][]time.Time{}
	}
	if len(p.times) > maxThreads {
		for a := range p.times {
			if len(p.recent(a, now)) == 0 {
				delete(p.times, a)
			}
		}
	}
	p.times[addr] = append(p.recent(addr, now), now)
}

// New checks cfg and builds the channel; nothing connects before Run.
func New(cfg Config, env channel.Env) (*Channel, error) {
	if !cfg.ConsentGranted {
		return nil, errors.New("channels.email.consentGranted is false: the mailbox's owner must agree that nb reads and answers it; set it to true")
	}
	if cfg.IMAPHost == "" || cfg.IMAPUsername == "" {
		return nil, errors.New("channels.email.imapHost and imapUsername are required")
	}
	if cfg.SMTPHost == "" && on(cfg.AutoReplyEnabled) {
		return nil, errors.New("channels.email.smtpHost is required to answer (or set autoReplyEnabled to false)")
	}
	from, err := mail.ParseAddress(cfg.FromAddress)
	if err != nil {
		return nil, fmt.Errorf("channels.email.fromAddress %q is not an address", cfg.FromAddress)
	}
	if cfg.IMAPPort == 0 {
		cfg.IMAPPort = map[bool]int{true: 993, false: 143}[on(cfg.IMAPUseSSL)]
	}
	if cfg.SMTPPort == 0 {
		cfg.SMTPPort = 587
		if cfg.SMTPUseSSL {
			cfg.SMTPPort = 465
		} else if !on(cfg.SMTPUseTLS) {
			cfg.SMTPPort = 25
		}
	}
	if !on(cfg.IMAPUseSSL) && !loopback(cfg.IMAPHost) {
		return nil, fmt.Errorf("channels.email.imapUseSsl is false: plain IMAP sends the password in clear, allowed to a loopback host only, not %s", cfg.IMAPHost)
	}
	if cfg.SMTPHost != "" && !cfg.SMTPUseSSL && !on(cfg.SMTPUseTLS) && !loopback(cfg.SMTPHost) {
		return nil, fmt.Errorf("channels.email.smtpUseTls and smtpUseSsl are false: plain SMTP is allowed to a loopback host only, not %s", cfg.SMTPHost)
	}
	if cfg.IMAPMailbox == "" {
		cfg.IMAPMailbox = "INBOX"
	}
	if cfg.PollIntervalSeconds <= 0 {
		cfg.PollIntervalSeconds = 30
	}
	if cfg.MaxMediaBytes <= 0 {
		cfg.MaxMediaBytes = 20 << 20
	}
	if cfg.MaxBodyChars <= 0 {
		cfg.MaxBodyChars = 12_000
	}
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = "Re: "
	}
	if cfg.MaxMailBytes <= 0 {
		cfg.MaxMailBytes = DefaultMaxMailBytes
	}
	if cfg.MaxMimeDepth <= 0 {
		cfg.MaxMimeDepth = DefaultMaxMimeDepth
	}
	if cfg.MaxMimeParts <= 0 {
		cfg.MaxMimeParts = DefaultMaxMimeParts
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.MaxRepliesPerHour <= 0 {
		cfg.MaxRepliesPerHour = DefaultMaxRepliesPerHour
	}
	c := &Channel{
		cfg:         cfg,
		env:         env,
		log:         env.Log().With("channel", Name),
		self:        strings.ToLower(from.Address),
		poll:        time.Duration(cfg.PollIntervalSeconds) * time.Second,
		idleRefresh: 5 * time.Minute,
		retryBase:   time.Second,
		timeout:     time.Minute,
		limits:      Limits{MailBytes: cfg.MaxMailBytes, Depth: cfg.MaxMimeDepth, Parts: cfg.MaxMimeParts, HeaderBytes: cfg.MaxHeaderBytes},
		handed:      perHour{limit: cfg.MaxRepliesPerHour},
		answered:    perHour{limit: cfg.MaxRepliesPerHour},
	}
	if cfg.AuthservID == "" && len(cfg.AllowFrom) > 0 {
		c.log.Warn("email: channels.email.authservId is not set: a From naming an address in allowFrom is believed unless an Authentication-Results field reports a failure; set it to the authserv-id your receiving server writes (docs/security.md)")
	}
	return c, nil
}

// DefaultMaxRepliesPerHour is channels.email.maxRepliesPerHour's default.
const DefaultMaxRepliesPerHour = 10

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Name is "email".
func (c *Channel) Name() string { return Name }

// Capabilities: plain text, no length limit, no edits.
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{Markdown: channel.Plain}
}

// position is the saved receive position: the mailbox's UIDVALIDITY and
// the last UID handed over.
type position struct {
	validity, uid uint32
}

func parsePosition(s string) (position, error) {
	if s == "" {
		return position{}, nil
	}
	a, b, ok := strings.Cut(s, ":")
	v, err1 := strconv.ParseUint(a, 10, 32)
	u, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return position{}, fmt.Errorf("the saved mailbox position %q is not UIDVALIDITY:UID", s)
	}
	return position{uint32(v), uint32(u)}, nil
}

func (p position) String() string { return fmt.Sprintf("%d:%d", p.validity, p.uid) }

// Run polls the mailbox until ctx ends.
func (c *Channel) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	cursor, saved, err := c.env.Position(ctx, Name)
	if err != nil {
		return fmt.Errorf("email: %w", err)
	}
	pos, err := parsePosition(saved)
	if err != nil {
		return fmt.Errorf("email: %s: %w", cursor, err)
	}
	rs, err := loadReplied(ctx, c.env)
	if err != nil {
		return fmt.Errorf("email: %w", err)
	}
	c.mu.Lock()
	c.replied = rs
	c.mu.Unlock()
	readied := false
	wait := c.retryBase
	for {
		connected := false
		err := c.session(ctx, in, cursor, &pos, func() {
			connected = true
			c.link.Up()
			if !readied {
				readied = true
				ready()
			}
		})
		if ctx.Err() != nil {
			return nil
		}
		if f := finalIMAP(err); f != nil {
			return f
		}
		if connected {
			wait = c.retryBase // a session that worked: the next failure starts over
		}
		c.log.Warn("email: mailbox session ended", "err", err, "retry_in", wait)
		c.link.Down(err)
		if !channel.Sleep(ctx, wait) {
			return nil
		}
		wait = min(wait*2, 5*time.Minute)
	}
}

var _ channel.Channel = (*Channel)(nil)
