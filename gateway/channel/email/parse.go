package email

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
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

// noReply says why RFC 3834 forbids answering a mail ("" when it does not).
func (c *Channel) noReply(h mail.Header, from, messageID string) string {
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
	if messageID != "" && c.replied.has(messageID) {
		return "already answered " + messageID
	}
	return ""
}

// parse reads a mail into the bus's form, or says why it is not to be
// answered.
func (c *Channel) parse(raw []byte, uidKey string) (bus.Inbound, string) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return bus.Inbound{}, "unreadable: " + err.Error()
	}
	h := msg.Header
	parser := mail.AddressParser{WordDecoder: words}
	from, err := parser.Parse(h.Get("From"))
	if err != nil {
		return bus.Inbound{}, "no usable From: " + err.Error()
	}
	addr := strings.ToLower(from.Address)
	messageID := strings.TrimSpace(h.Get("Message-ID"))
	c.mu.Lock()
	why := c.noReply(h, addr, messageID)
	c.mu.Unlock()
	if why != "" {
		return bus.Inbound{}, why
	}
	subject, err := words.DecodeHeader(h.Get("Subject"))
	if err != nil {
		subject = h.Get("Subject")
	}
	body, err := textOf(h.Get("Content-Type"), h.Get("Content-Transfer-Encoding"), msg.Body)
	if err != nil {
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
	id := messageID
	if id == "" {
		id = "uid:" + uidKey
	}
	refs := strings.TrimSpace(h.Get("References"))
	if refs == "" {
		refs = strings.TrimSpace(h.Get("In-Reply-To"))
	}
	if messageID != "" {
		refs = strings.TrimSpace(refs + " " + messageID)
	}
	c.mu.Lock()
	if len(c.threads) > 10_000 {
		clear(c.threads)
	}
	t := thread{messageID: messageID, references: refs, subject: subject}
	c.threads[addr] = t
	if messageID != "" {
		c.threads[messageID] = t
	}
	c.mu.Unlock()
	paths, notes := c.attachments(raw, id)
	if len(notes) > 0 {
		body = strings.TrimSpace(body + "\n\n" + strings.Join(notes, "\n"))
	}
	return bus.Inbound{
		Channel:   Name,
		ID:        id,
		SenderID:  addr,
		ChatID:    addr,
		Media:     paths,
		Content:   "Subject: " + subject + "\n\n" + body,
		Timestamp: date.UTC(),
		Metadata: map[string]any{
			"group": false, "mentioned": true, "subject": subject,
			"message_id": messageID, "sender_name": from.Name,
		},
	}, ""
}

// attachments stores a mail's attached files (the parts with a file name)
// under the workspace, each up to maxMediaBytes, and returns their paths
// and a note per file for the text.
func (c *Channel) attachments(raw []byte, id string) (paths, notes []string) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, nil
	}
	prefix := fmt.Sprintf("%x", sha256.Sum256([]byte(id)))[:16]
	n := 0
	walkFiles(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body, 0, func(name string, r io.Reader) {
		n++
		dir, err := c.env.MediaDir(Name)
		var path string
		if err == nil {
			path, err = channel.StoreMedia(r, dir, fmt.Sprintf("%s_%d_%s", prefix, n, name), c.cfg.MaxMediaBytes)
		}
		if channel.IsTooLarge(err) {
			err = fmt.Errorf("%w (channels.email.maxMediaBytes)", err)
		}
		if err != nil {
			c.log.Warn("email: attachment not stored", "name", name, "mail", id, "err", err)
			notes = append(notes, fmt.Sprintf("[attachment %s not received: %v]", name, err))
			return
		}
		paths = append(paths, path)
		notes = append(notes, fmt.Sprintf("[attachment: %s]", path))
	})
	return paths, notes
}

// walkFiles calls file for each part of a MIME body that carries a file
// name (Content-Disposition filename, else Content-Type name), decoded.
func walkFiles(contentType, encoding string, r io.Reader, depth int, file func(name string, r io.Reader)) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.HasPrefix(mt, "multipart/") || depth > 10 {
		return
	}
	mr := multipart.NewReader(r, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err != nil {
			return
		}
		name := p.FileName()
		if name == "" {
			if _, ps, err := mime.ParseMediaType(p.Header.Get("Content-Type")); err == nil {
				name = ps["name"]
			}
		}
		if name == "" {
			walkFiles(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p, depth+1, file)
			continue
		}
		if d, err := words.DecodeHeader(name); err == nil {
			name = d
		}
		var body io.Reader = p
		switch strings.ToLower(strings.TrimSpace(p.Header.Get("Content-Transfer-Encoding"))) {
		case "quoted-printable":
			body = quotedprintable.NewReader(p)
		case "base64":
			body = base64.NewDecoder(base64.StdEncoding, &stripSpace{r: p})
		}
		file(filepath.Base(name), body)
	}
}

// textOf is a part's text: text/plain as it is, text/html as Markdown,
// multipart by its best part (plain before HTML); other parts give "".
func textOf(contentType, encoding string, r io.Reader) (string, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || contentType == "" {
		mt, params = "text/plain", map[string]string{"charset": "us-ascii"}
	}
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, &stripSpace{r: r})
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(r, params["boundary"])
		var plain, html string
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return "", err
			}
			t, err := textOf(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p)
			if err != nil {
				continue
			}
			pmt, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
			switch {
			case plain == "" && (pmt == "text/plain" || pmt == "" || strings.HasPrefix(pmt, "multipart/")) && t != "":
				plain = t
			case html == "" && pmt == "text/html":
				html = t
			}
		}
		if plain != "" {
			return plain, nil
		}
		return html, nil
	}
	if !strings.HasPrefix(mt, "text/") {
		return "", nil
	}
	if cs := params["charset"]; cs != "" && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
		if dr, err := charsetReader(cs, r); err == nil {
			r = dr
		}
	}
	b, err := io.ReadAll(io.LimitReader(r, maxMailBytes))
	if err != nil {
		return "", err
	}
	if mt == "text/html" {
		return htmltomarkdown.ConvertString(string(b))
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
