package email

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"golang.org/x/text/encoding/htmlindex"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

var words = &mime.WordDecoder{CharsetReader: charsetReader}

func charsetReader(charset string, r io.Reader) (io.Reader, error) {
	enc, err := htmlindex.Get(charset)
	if err != nil {
		return nil, fmt.Errorf("unknown charset %q", charset)
	}
	return enc.NewDecoder().Reader(r), nil
}

// maxHTMLBytes bounds the HTML of one mail converted to Markdown, all
// its HTML parts together: the text is cut at maxBodyChars anyway, and
// conversion is slow on some markup (a megabyte of "<a>x" takes seconds,
// 256 KB a few tenths).
const maxHTMLBytes = 256 << 10

// head is what the channel decides on before it reads a mail's body.
type head struct {
	h         mail.Header
	from      *mail.Address
	addr      string // the sender's address, lower case
	messageID string
}

// readHead reads a mail's header (raw may be the header alone).
func (c *Channel) readHead(raw []byte) (head, error) {
	th, _, err := readHeader(raw, 0, c.limits.HeaderBytes, "the mail's header")
	if err != nil {
		return head{}, err
	}
	h := mail.Header(th)
	if n := len(h["From"]); n != 1 {
		return head{h: h}, fmt.Errorf("%d From fields, not one", n)
	}
	parser := mail.AddressParser{WordDecoder: words}
	from, err := parser.Parse(h.Get("From"))
	if err != nil {
		return head{h: h}, fmt.Errorf("no usable From: %w", err)
	}
	return head{h: h, from: from, addr: strings.ToLower(from.Address), messageID: strings.TrimSpace(h.Get("Message-ID"))}, nil
}

// refusal says why a mail is not handed to the assistant, decided on its
// header alone so that nothing more of it is read: the automatic
// responders' marks (RFC 3834, mailing lists, bounces), a sender the
// gateway would not answer (channel.Admits: allowFrom does not name
// them; their attachments are never fetched), a From
// the receiving server did not authenticate, a correspondent answered
// maxRepliesPerHour times in the last hour, a copy of a mail answered
// already. "" when the mail is to be read.
func (c *Channel) refusal(in channel.Inbox, hd head, now time.Time) string {
	if why := c.noReply(hd.h, hd.addr); why != "" {
		return why
	}
	if !channel.Admits(in, bus.Inbound{Channel: Name, SenderID: hd.addr, ChatID: hd.addr}) {
		return "the sender is not in channels.email.allowFrom (mail not read, attachments not fetched)"
	}
	if why := c.unauthenticated(hd.h, hd.addr); why != "" {
		return why
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.handed.allow(hd.addr, now) {
		return fmt.Sprintf("%s wrote %d mails in the last hour (channels.email.maxRepliesPerHour): a loop with an automatic responder is likely", hd.addr, c.cfg.MaxRepliesPerHour)
	}
	if hd.messageID != "" && c.replied.has(copyKey(hd.addr, hd.messageID)) {
		return "a copy of a mail already answered (" + hd.messageID + ")"
	}
	return ""
}

// copyKey names a correspondent's Message-ID in the answered set: a
// Message-ID is whatever its sender wrote, so it only identifies mail
// together with that sender.
func copyKey(addr, messageID string) string {
	sum := sha256.Sum256([]byte(addr + "\x00" + messageID))
	return "mid:" + hex.EncodeToString(sum[:12])
}

// noReply says why no automatic responder may answer a mail ("" when it
// may): RFC 3834's rules (its own address, Auto-Submitted other than
// "no", Precedence bulk, list or junk, bounces' empty Return-Path,
// MAILER-DAEMON, owner-* and *-request), mailing lists (List-Id,
// List-Unsubscribe), and the marks other responders use (X-Autoreply,
// X-Autorespond). Not X-Auto-Response-Suppress: it asks the
// recipient's responders to keep quiet, and Outlook writes it on mail
// people send, so honouring it could silence the owner.
func (c *Channel) noReply(h mail.Header, from string) string {
	if from == c.self {
		return "sent from the mailbox's own address"
	}
	as := strings.ToLower(strings.TrimSpace(h.Get("Auto-Submitted")))
	if i := strings.IndexByte(as, ';'); i >= 0 {
		as = strings.TrimSpace(as[:i])
	}
	if as != "" && as != "no" {
		return "Auto-Submitted: " + as
	}
	switch p := strings.ToLower(strings.TrimSpace(h.Get("Precedence"))); p {
	case "bulk", "list", "junk":
		return "Precedence: " + p
	}
	for _, k := range []string{"List-Id", "List-Unsubscribe", "X-Autoreply", "X-Autorespond"} {
		if _, ok := h[k]; ok {
			return k + " (a mailing list or an automatic responder)"
		}
	}
	for _, rp := range h["Return-Path"] {
		if strings.Trim(strings.TrimSpace(rp), "<> ") == "" {
			return "an empty Return-Path (a bounce or a notification)"
		}
	}
	local := from[:max(strings.LastIndexByte(from, '@'), 0)]
	if local == "mailer-daemon" || strings.HasPrefix(local, "owner-") || strings.HasSuffix(local, "-request") {
		return "sent by " + from + " (a mail system or a list's address, RFC 3834)"
	}
	return ""
}

// parse reads a whole mail into the bus's form. key is the mail's
// "UIDVALIDITY:UID": its id on the bus, the thread an answer finds, and
// the name its attachments are stored under (never its Message-ID,
// which its sender chose). A *LimitError says which limit it broke.
func (c *Channel) parse(ctx context.Context, raw []byte, key string) (_ bus.Inbound, err error) {
	defer func() {
		// A library the text goes through (charsets, HTML) failing on
		// a stranger's bytes must not take the gateway down, nor make
		// it crash again on the same mail after a restart: the mail is
		// quarantined instead.
		if p := recover(); p != nil {
			err = fmt.Errorf("the mail could not be parsed: %v", p)
		}
	}()
	ents, err := scanMIME(ctx, raw, c.limits)
	if err != nil {
		return bus.Inbound{}, err
	}
	hd, err := c.readHead(raw)
	if err != nil {
		return bus.Inbound{}, err
	}
	h := hd.h
	subject, err := words.DecodeHeader(h.Get("Subject"))
	if err != nil {
		subject = h.Get("Subject")
	}
	html := maxHTMLBytes
	body, err := c.textOf(ctx, ents, 0, &html)
	if err != nil {
		if ctx.Err() != nil {
			return bus.Inbound{}, ctx.Err()
		}
		body = fmt.Sprintf("[the mail's text could not be read: %v]", err)
	}
	body = strings.TrimSpace(body)
	if utf8.RuneCountInString(body) > c.cfg.MaxBodyChars {
		body = string([]rune(body)[:c.cfg.MaxBodyChars]) + "\n[… cut at channels.email.maxBodyChars]"
	}
	date, err := h.Date()
	if err != nil {
		date = time.Now()
	}
	id := "uid:" + key
	refs := strings.TrimSpace(h.Get("References"))
	if refs == "" {
		refs = strings.TrimSpace(h.Get("In-Reply-To"))
	}
	if hd.messageID != "" {
		refs = strings.TrimSpace(refs + " " + hd.messageID)
	}
	paths, notes, err := c.attachments(ctx, ents, id)
	if err != nil {
		return bus.Inbound{}, err
	}
	if len(notes) > 0 {
		body = strings.TrimSpace(body + "\n\n" + strings.Join(notes, "\n"))
	}
	c.mu.Lock()
	c.threads.add(id, thread{from: hd.addr, messageID: hd.messageID, references: refs, subject: subject})
	c.handed.add(hd.addr, time.Now())
	c.mu.Unlock()
	return bus.Inbound{
		Channel:   Name,
		ID:        id,
		SenderID:  hd.addr,
		ChatID:    hd.addr,
		Media:     paths,
		Content:   "Subject: " + subject + "\n\n" + body,
		Timestamp: date.UTC(),
		Metadata: map[string]any{
			"group": false, "mentioned": true, "subject": subject,
			"message_id": hd.messageID, "sender_name": hd.from.Name,
		},
	}, nil
}

// attachments stores a mail's attached files (the parts with a file name)
// under the workspace, each up to maxMediaBytes, named after the mail's
// key, and returns their paths and a note per file for the text.
func (c *Channel) attachments(ctx context.Context, ents []entity, id string) (paths, notes []string, err error) {
	prefix := fmt.Sprintf("%x", sha256.Sum256([]byte(id)))[:16]
	n := 0
	for i := 1; i < len(ents); i++ {
		e := &ents[i]
		name := e.fileName()
		if e.isMultipart() || name == "" {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if d, err := words.DecodeHeader(name); err == nil {
			name = d
		}
		name = filepath.Base(name)
		n++
		dir, err := c.env.MediaDir(Name)
		var path string
		if err == nil {
			path, err = channel.StoreMedia(decoded(e), dir, fmt.Sprintf("%s_%d_%s", prefix, n, name), c.cfg.MaxMediaBytes)
		}
		if channel.IsTooLarge(err) {
			err = fmt.Errorf("%w (channels.email.maxMediaBytes)", err)
		}
		if err != nil {
			c.log.Warn("email: attachment not stored", "name", name, "mail", id, "err", err)
			notes = append(notes, fmt.Sprintf("[attachment %s not received: %v]", name, err))
			continue
		}
		paths = append(paths, path)
		notes = append(notes, fmt.Sprintf("[attachment: %s]", path))
	}
	return paths, notes, nil
}

// decoded is an entity's body with its transfer encoding undone.
func decoded(e *entity) io.Reader {
	var r io.Reader = bytes.NewReader(e.body)
	switch e.encoding() {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, &stripSpace{r: r})
	}
	return r
}

// textOf is an entity's text: text/plain as it is, text/html as
// Markdown, a multipart by its best part (plain before HTML); other
// parts give "". Its recursion is as deep as the mail's nesting, which
// scanMIME bounded. html is how many bytes of HTML may still be
// converted.
func (c *Channel) textOf(ctx context.Context, ents []entity, i int, html *int) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	e := &ents[i]
	if e.isMultipart() {
		var plain, fromHTML string
		haveHTML := false
		for _, k := range e.children {
			ce := &ents[k]
			isPlain := ce.mediaType == "text/plain" || ce.isMultipart()
			isHTML := ce.mediaType == "text/html"
			if !(isPlain || isHTML && !haveHTML) {
				continue
			}
			t, err := c.textOf(ctx, ents, k, html)
			if err != nil {
				if ctx.Err() != nil {
					return "", ctx.Err()
				}
				continue
			}
			if isPlain && t != "" {
				plain = t
				break
			}
			if isHTML {
				fromHTML, haveHTML = t, t != ""
			}
		}
		if plain != "" {
			return plain, nil
		}
		return fromHTML, nil
	}
	if !strings.HasPrefix(e.mediaType, "text/") {
		return "", nil
	}
	r := decoded(e)
	if cs := e.params["charset"]; cs != "" && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
		if dr, err := charsetReader(cs, r); err == nil {
			r = dr
		}
	}
	if e.mediaType == "text/html" {
		if *html <= 0 {
			return "", nil
		}
		b, err := io.ReadAll(io.LimitReader(r, int64(*html)))
		if err != nil {
			return "", err
		}
		*html -= len(b)
		return htmltomarkdown.ConvertString(string(b))
	}
	// Four bytes a character at most: more is cut at maxBodyChars anyway.
	b, err := io.ReadAll(io.LimitReader(r, 4*int64(c.cfg.MaxBodyChars)+4))
	if err != nil {
		return "", err
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), nil
}

// stripSpace drops the line breaks of base64 bodies.
type stripSpace struct{ r io.Reader }

func (s *stripSpace) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	j := 0
	for _, b := range p[:n] {
		if b != '\r' && b != '\n' && b != ' ' && b != '\t' {
			p[j] = b
			j++
		}
	}
	return j, err
}
