package slack

import (
	"sort"
	"strings"

	"github.com/nbots/nb/gateway/channel"
)

// escaper escapes the three characters Slack's mrkdwn reserves.
var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// mrkdwn renders formatted text as Slack's mrkdwn: *bold*, _italic_,
// ~strike~, `code`, ```blocks```, <url|links> and "> " quotes, with &, <
// and > escaped everywhere else.
func mrkdwn(r channel.Rich) string {
	type mark struct {
		at    int
		open  bool
		order int
		text  string
	}
	var marks []mark
	quote := make([]bool, len(r.Text)+1)
	for i, s := range r.Spans {
		var open, close string
		switch s.Kind {
		case channel.Bold:
			open, close = "*", "*"
		case channel.Italic:
			open, close = "_", "_"
		case channel.Strike:
			open, close = "~", "~"
		case channel.Code:
			open, close = "`", "`"
		case channel.Pre:
			open, close = "```\n", "\n```"
		case channel.Link:
			if s.URL == "" || strings.ContainsAny(s.URL, "<>|") {
				continue
			}
			open, close = "<"+s.URL+"|", ">"
		case channel.Quote:
			open = "> "
			for j := s.Start; j < s.End; j++ {
				quote[j] = true
			}
		}
		marks = append(marks, mark{s.Start, true, i, open}, mark{s.End, false, i, close})
	}
	// At one offset, closes come before opens; closes in the reverse
	// order of their opens, so that spans nest.
	sort.SliceStable(marks, func(i, j int) bool {
		a, b := marks[i], marks[j]
		if a.at != b.at {
			return a.at < b.at
		}
		if a.open != b.open {
			return !a.open
		}
		if a.open {
			return a.order < b.order
		}
		return a.order > b.order
	})
	var b strings.Builder
	pos := 0
	write := func(end int) {
		seg := r.Text[pos:end]
		for i, line := range strings.Split(seg, "\n") {
			if i > 0 {
				b.WriteString("\n")
				if quote[pos] {
					b.WriteString("> ")
				}
			}
			b.WriteString(escaper.Replace(line))
			pos += len(line) + 1
		}
		pos = end
	}
	for _, m := range marks {
		write(m.at)
		b.WriteString(m.text)
	}
	write(len(r.Text))
	return b.String()
}
