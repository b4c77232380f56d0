package email

import (
	"fmt"
	"net/mail"
	"strings"
)

// authResult is one Authentication-Results field (RFC 8601): who wrote
// it and, by method (spf, dkim, dmarc), each result with its properties.
type authResult struct {
	servID  string
	results []authMethod
}

type authMethod struct {
	method, result string
	props          map[string]string // "smtp.mailfrom", "header.d", …
}

// parseAuthResults reads one Authentication-Results value; comments are
// dropped, names and results are in lower case.
func parseAuthResults(v string) authResult {
	v = stripComments(v)
	fields := strings.Split(v, ";")
	id := strings.Fields(fields[0])
	var r authResult
	if len(id) > 0 {
		r.servID = strings.ToLower(id[0])
	}
	for _, f := range fields[1:] {
		toks := strings.Fields(f)
		if len(toks) == 0 {
			continue
		}
		k, val, ok := strings.Cut(toks[0], "=")
		if !ok {
			continue // "none"
		}
		k, _, _ = strings.Cut(k, "/") // method/version
		m := authMethod{method: strings.ToLower(k), result: strings.ToLower(val), props: map[string]string{}}
		for _, t := range toks[1:] {
			if pk, pv, ok := strings.Cut(t, "="); ok {
				m.props[strings.ToLower(pk)] = strings.ToLower(strings.Trim(pv, `"`))
			}
		}
		r.results = append(r.results, m)
	}
	return r
}

// stripComments removes RFC 5322 comments, "(…)" nested, outside quoted
// strings.
func stripComments(s string) string {
	var b strings.Builder
	depth, quoted := 0, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\\' && i+1 < len(s) && (quoted || depth > 0):
			if depth == 0 {
				b.WriteByte(ch)
				b.WriteByte(s[i+1])
			}
			i++
		case ch == '"' && depth == 0:
			quoted = !quoted
			b.WriteByte(ch)
		case ch == '(' && !quoted:
			depth++
		case ch == ')' && !quoted && depth > 0:
			depth--
			b.WriteByte(' ')
		case depth == 0:
			b.WriteByte(ch)
		}
	}
	return b.String()
}

// domainOf is the part of an address (or a bare domain) after its last
// "@", lower case.
func domainOf(s string) string {
	return strings.ToLower(strings.TrimSpace(s[strings.LastIndexByte(s, '@')+1:]))
}

// aligned says whether an authenticated domain d vouches for the From
// domain: the same domain, or one of its parents (relaxed alignment, as
// DMARC's, without the public suffix list: a parent a stranger cannot
// control, where DMARC would also accept a sibling).
func aligned(from, d string) bool {
	return d != "" && (from == d || strings.HasSuffix(from, "."+d))
}

// passes says whether one result authenticates the From domain: DMARC
// passing (for that domain when it names it), or SPF or DKIM passing for
// a domain aligned with it.
func (m authMethod) passes(from string) bool {
	if m.result != "pass" {
		return false
	}
	switch m.method {
	case "dmarc":
		hf := m.props["header.from"]
		return hf == "" || domainOf(hf) == from
	case "spf":
		return aligned(from, domainOf(m.props["smtp.mailfrom"]))
	case "dkim":
		d := m.props["header.d"]
		if d == "" {
			d = m.props["header.i"]
		}
		return aligned(from, domainOf(d))
	}
	return false
}

// fails says whether a result is a failure that disproves the From:
// DMARC failing, or SPF failing (hard).
func (m authMethod) fails() bool {
	switch m.method {
	case "dmarc":
		return m.result == "fail"
	case "spf":
		return m.result == "fail"
	}
	return false
}

// unauthenticated says why a mail's From is not to be believed ("" when
// it is). With channels.email.authservId set, only the
// Authentication-Results fields that server wrote count (anyone can
// write the field; the receiving server adds its own on top): the
// topmost of them must show DMARC passing, or SPF or DKIM passing for a
// domain aligned with From's, and none of them a failure. Without it,
// a failure in any such field refuses the mail (a sender can only add
// failures to their own mail), and nothing is required.
func (c *Channel) unauthenticated(h mail.Header, addr string) string {
	from := domainOf(addr)
	want := strings.ToLower(c.cfg.AuthservID)
	var top *authResult
	for _, v := range h["Authentication-Results"] {
		r := parseAuthResults(v)
		if want != "" && r.servID != want {
			continue
		}
		spfFail, dkimPass := false, false
		for _, m := range r.results {
			switch {
			case m.method == "dmarc" && m.fails():
				return fmt.Sprintf("From %s is not authenticated: %s reports dmarc=%s", addr, r.servID, m.result)
			case m.method == "spf" && m.fails():
				spfFail = true
			case m.method == "dkim" && m.passes(from):
				dkimPass = true
			}
		}
		if spfFail && !dkimPass {
			return fmt.Sprintf("From %s is not authenticated: %s reports spf=fail and no aligned dkim=pass", addr, r.servID)
		}
		if top == nil {
			top = &r
		}
	}
	if want == "" {
		return ""
	}
	if top == nil {
		return fmt.Sprintf("From %s is not authenticated: no Authentication-Results from %s (channels.email.authservId)", addr, c.cfg.AuthservID)
	}
	for _, m := range top.results {
		if m.passes(from) {
			return ""
		}
	}
	return fmt.Sprintf("From %s is not authenticated: %s reports no dmarc=pass, nor an spf=pass or dkim=pass aligned with %s", addr, top.servID, from)
}
