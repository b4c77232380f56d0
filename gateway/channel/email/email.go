// Package email is the gateway's email channel: it polls a mailbox over
// IMAP, remembering the last UID it handed to the gateway (with the
// mailbox's UIDVALIDITY) so a restart neither replays nor skips mail, and
// answers over SMTP in the thread (In-Reply-To, References). It follows
// RFC 3834's rules for automatic responders: it never answers its own
// address, mail marked Auto-Submitted (other than "no"), mail with
// Precedence bulk, list or junk, or one Message-ID twice, and it marks
// its own mail "Auto-Submitted: auto-replied". It reads nobody's mail
// until channels.email.consentGranted is true.
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
	// gateway checks SenderID against it.
	AllowFrom []string `json:"allowFrom"`
}

func on(b *bool) bool { return b == nil || *b }

// Channel is one mailbox.
type Channel struct {
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

	mu sync.Mutex
	// threads is the last mail of each correspondent: what an answer
	// replies to.
	threads map[string]thread
	replied *repliedSet
}

// thread is what an answer needs of the mail it answers.
type thread struct {
	messageID  string
	references string
	subject    string
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
	return &Channel{
		cfg:         cfg,
		env:         env,
		log:         env.Log().With("channel", Name),
		self:        strings.ToLower(from.Address),
		poll:        time.Duration(cfg.PollIntervalSeconds) * time.Second,
		idleRefresh: 5 * time.Minute,
		retryBase:   time.Second,
		timeout:     time.Minute,
		threads:     map[string]thread{},
	}, nil
}

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
		if !channel.Sleep(ctx, wait) {
			return nil
		}
		wait = min(wait*2, 5*time.Minute)
	}
}

var _ channel.Channel = (*Channel)(nil)
