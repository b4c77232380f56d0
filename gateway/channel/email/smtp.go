package email

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// repliedSet is the mails already answered, kept in a file so that a
// restart answers none twice: each by its key ("uid:UIDVALIDITY:UID")
// and by its sender and Message-ID (copyKey), which finds a copy of it
// delivered again.
type repliedSet struct {
	file  channel.Cursor
	ids   map[string]bool
	order []string
}

const keepReplied = 5000

func loadReplied(ctx context.Context, env channel.Env) (*repliedSet, error) {
	cur, s, err := env.Position(ctx, Name+".replied")
	if err != nil {
		return nil, err
	}
	r := &repliedSet{file: cur, ids: map[string]bool{}}
	for _, id := range strings.Fields(s) {
		r.ids[id] = true
		r.order = append(r.order, id)
	}
	return r, nil
}

func (r *repliedSet) has(id string) bool { return r != nil && r.ids[id] }

func (r *repliedSet) add(ctx context.Context, id string) error {
	if r == nil || id == "" || r.ids[id] {
		return nil
	}
	r.ids[id] = true
	r.order = append(r.order, id)
	if len(r.order) > keepReplied {
		for _, old := range r.order[:len(r.order)-keepReplied] {
			delete(r.ids, old)
		}
		r.order = append([]string(nil), r.order[len(r.order)-keepReplied:]...)
	}
	return r.file.Save(ctx, strings.Join(r.order, "\n"))
}

// Send mails m's text to its correspondent. An answer (m.ReplyTo, the
// key of a mail of the correspondent's) goes in that mail's thread, once
// (RFC 3834), and at most maxRepliesPerHour an hour to one
// correspondent; another message goes in the thread of their last mail,
// and neither counts as nor waits for an answer. Progress and tool hints
// are not mailed.
func (c *Channel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	if m.Kind == bus.Progress || m.Kind == bus.ToolHint {
		return "", nil
	}
	if !on(c.cfg.AutoReplyEnabled) {
		return "", &channel.Undeliverable{Reason: "channels.email.autoReplyEnabled is false"}
	}
	to, err := mail.ParseAddress(m.ChatID)
	if err != nil {
		return "", &channel.Undeliverable{Reason: fmt.Sprintf("%q is not an email address", m.ChatID)}
	}
	addr := strings.ToLower(to.Address)
	if addr == c.self {
		return "", &channel.Undeliverable{Reason: "the mailbox never writes to its own address (RFC 3834)"}
	}
	now := time.Now()
	c.mu.Lock()
	key, t, found := c.threads.find(m.ReplyTo, addr)
	answer := found && m.ReplyTo != "" && key == m.ReplyTo
	var refused string
	switch {
	case answer && c.replied.has(key):
		refused = "already answered " + describe(t, key) + " (RFC 3834: one answer per mail)"
	case answer && !c.answered.allow(addr, now):
		refused = fmt.Sprintf("%d answers mailed to %s in the last hour (channels.email.maxRepliesPerHour)", c.cfg.MaxRepliesPerHour, addr)
	}
	c.mu.Unlock()
	if refused != "" {
		return "", &channel.Undeliverable{Reason: refused}
	}
	text, files := c.env.Outgoing(m, MaxAttachmentBytes)
	// A turn's answer has the same Message-ID on every try and replica:
	// mail stores keep one copy of a mail delivered twice with one id.
	pk, _ := channel.PieceKey(m, 0, text)
	id, msg := c.compose(addr, t, text, files, pk)
	if err := c.smtpSend(ctx, addr, msg); err != nil {
		return "", err
	}
	if !answer {
		return id, nil
	}
	c.mu.Lock()
	c.answered.add(addr, now)
	err = c.replied.add(ctx, key)
	if err == nil && t.messageID != "" {
		err = c.replied.add(ctx, copyKey(addr, t.messageID))
	}
	c.mu.Unlock()
	if err != nil {
		c.log.Error("email: recording an answer", "err", err)
	}
	return id, nil
}

// describe names a mail in messages: its Message-ID, else its key.
func describe(t thread, key string) string {
	if t.messageID != "" {
		return t.messageID
	}
	return key
}

// MaxAttachmentBytes bounds one attached file: most providers refuse
// mail over 25 MB, and base64 makes a file a third larger.
const MaxAttachmentBytes = 18 << 20

// compose writes the answer: threaded, marked auto-replied, its text
// UTF-8 quoted-printable; with files, multipart/mixed, the text first and
// each file a base64 attachment. Its Message-ID's left part is key, or
// random when key is "".
func (c *Channel) compose(to string, t thread, text string, files []channel.Attachment, key string) (string, []byte) {
	if key == "" {
		var rnd [12]byte
		rand.Read(rnd[:]) //nolint:errcheck // never fails
		key = hex.EncodeToString(rnd[:])
	}
	domain := c.self[strings.LastIndexByte(c.self, '@')+1:]
	id := "<" + key + "@" + domain + ">"
	subject := t.subject
	if subject == "" {
		subject = "Message from your assistant"
	} else if !strings.HasPrefix(strings.ToLower(subject), strings.ToLower(strings.TrimSpace(c.cfg.SubjectPrefix))) {
		subject = c.cfg.SubjectPrefix + subject
	}
	var b bytes.Buffer
	header := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	header("From", (&mail.Address{Address: c.cfg.FromAddress}).String())
	header("To", (&mail.Address{Address: to}).String())
	header("Subject", mime.QEncoding.Encode("utf-8", subject))
	header("Date", time.Now().Format(time.RFC1123Z))
	header("Message-ID", id)
	if t.messageID != "" {
		header("In-Reply-To", t.messageID)
		header("References", t.references)
	}
	header("Auto-Submitted", "auto-replied")
	header("MIME-Version", "1.0")
	body := strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\n", "\r\n")
	if len(files) == 0 {
		header("Content-Type", "text/plain; charset=utf-8")
		header("Content-Transfer-Encoding", "quoted-printable")
		b.WriteString("\r\n")
		qp := quotedprintable.NewWriter(&b)
		qp.Write([]byte(body)) //nolint:errcheck // a buffer
		qp.Close()             //nolint:errcheck // a buffer
		return id, b.Bytes()
	}
	mw := multipart.NewWriter(&b)
	header("Content-Type", mime.FormatMediaType("multipart/mixed", map[string]string{"boundary": mw.Boundary()}))
	b.WriteString("\r\n")
	part, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"text/plain; charset=utf-8"}, "Content-Transfer-Encoding": {"quoted-printable"}})
	qp := quotedprintable.NewWriter(part)
	qp.Write([]byte(body)) //nolint:errcheck // a buffer
	qp.Close()             //nolint:errcheck // a buffer
	for _, f := range files {
		part, _ := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {mime.FormatMediaType(f.Type, map[string]string{"name": f.Name})},
			"Content-Disposition":       {mime.FormatMediaType("attachment", map[string]string{"filename": f.Name})},
			"Content-Transfer-Encoding": {"base64"},
		})
		enc := base64.StdEncoding.EncodeToString(f.Data)
		for len(enc) > 76 {
			part.Write([]byte(enc[:76] + "\r\n")) //nolint:errcheck // a buffer
			enc = enc[76:]
		}
		part.Write([]byte(enc + "\r\n")) //nolint:errcheck // a buffer
	}
	mw.Close() //nolint:errcheck // a buffer
	return id, b.Bytes()
}

func (c *Channel) smtpSend(ctx context.Context, to string, msg []byte) error {
	addr := net.JoinHostPort(c.cfg.SMTPHost, strconv.Itoa(c.cfg.SMTPPort))
	d := net.Dialer{Timeout: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("SMTP %s: %w", addr, err)
	}
	conn.SetDeadline(time.Now().Add(c.timeout)) //nolint:errcheck // a fresh connection
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var cl *smtp.Client
	switch {
	case c.cfg.SMTPUseSSL:
		cl = smtp.NewClient(tls.Client(conn, c.tlsConfig(c.cfg.SMTPHost)))
	case on(c.cfg.SMTPUseTLS):
		if cl, err = smtp.NewClientStartTLS(conn, c.tlsConfig(c.cfg.SMTPHost)); err != nil {
			conn.Close()
			return fmt.Errorf("SMTP %s: STARTTLS: %w", addr, err)
		}
	default:
		cl = smtp.NewClient(conn)
	}
	defer cl.Close()
	err = func() error {
		if c.cfg.SMTPUsername != "" {
			if err := cl.Auth(sasl.NewPlainClient("", c.cfg.SMTPUsername, c.cfg.SMTPPassword)); err != nil {
				return fmt.Errorf("login: %w", err)
			}
		}
		if err := cl.Mail(c.self, nil); err != nil {
			return err
		}
		if err := cl.Rcpt(to, nil); err != nil {
			return err
		}
		w, err := cl.Data()
		if err != nil {
			return err
		}
		if _, err := w.Write(msg); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		return cl.Quit()
	}()
	if err == nil {
		return nil
	}
	var se *smtp.SMTPError
	if errors.As(err, &se) && se.Code >= 500 {
		return &channel.Undeliverable{Reason: fmt.Sprintf("SMTP %s: %d %s", addr, se.Code, se.Message)}
	}
	return fmt.Errorf("SMTP %s: %w", addr, err)
}
