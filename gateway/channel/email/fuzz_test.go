package email

import (
	"bytes"
	"context"
	"testing"
)

// FuzzParse: no mail makes the parser panic or break its limits, and
// every body it finds is a piece of the mail.
func FuzzParse(f *testing.F) {
	f.Add([]byte("From: a@example.org\r\nSubject: hi\r\n\r\nhello"))
	f.Add([]byte("From: a@example.org\r\nContent-Type: multipart/alternative; boundary=B\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nplain\r\n--B\r\nContent-Type: text/html\r\n\r\n<p>html</p>\r\n--B--\r\n"))
	f.Add([]byte("From: a@example.org\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n--B--\r\n--B\r\nContent-Disposition: attachment; filename=\"x.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\nAAEC\r\n--B--"))
	f.Add([]byte("From: a@example.org\nContent-Type: multipart/mixed; boundary=\"a b\"\n\n--a b \n\n--a b--\n"))
	f.Add(nested("a@example.org", 20))
	lim := Limits{MailBytes: 1 << 20, Depth: 8, Parts: 32, HeaderBytes: 1024}
	c := &Channel{cfg: Config{MaxBodyChars: 1000, AllowFrom: []string{"*"}}, limits: lim}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ents, err := scanMIME(context.Background(), raw, lim)
		if err != nil {
			return
		}
		if len(ents) > lim.Parts+1 {
			t.Fatalf("%d entities over the limit of %d parts", len(ents), lim.Parts)
		}
		for _, e := range ents {
			if e.depth > lim.Depth {
				t.Fatalf("depth %d over the limit %d", e.depth, lim.Depth)
			}
			if len(e.body) > 0 && !bytes.Contains(raw, e.body) {
				t.Fatalf("a body that is not in the mail: %q", e.body)
			}
		}
		html := maxHTMLBytes
		c.textOf(context.Background(), ents, 0, &html) //nolint:errcheck // only that it returns

		if hd, err := c.readHead(raw); err == nil {
			c.noReply(hd.h, hd.addr)
			c.unauthenticated(hd.h, hd.addr)
		}
	})
}

func FuzzAuthResults(f *testing.F) {
	f.Add(`mx.example.net; spf=pass smtp.mailfrom=example.org; dkim=pass (good) header.d=example.org; dmarc=pass header.from=example.org`)
	f.Add(`mx.example.net 1; none`)
	f.Add(`mx.example.net; dmarc=fail ("quoted (not a comment)") header.from="example.org"`)
	f.Fuzz(func(t *testing.T, v string) {
		r := parseAuthResults(v)
		for _, m := range r.results {
			m.passes("example.org")
			m.fails()
		}
	})
}
