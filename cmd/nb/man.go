package main

import (
	"fmt"
	"strings"
)

// manPage prints nb(1) in roff, made from the same help texts as --help
// (nb help --man > nb.1; man ./nb.1).
func (a *App) manPage() error {
	var b strings.Builder
	b.WriteString(".TH NB 1 \"\" \"nb " + Version + "\" \"User Commands\"\n")
	b.WriteString(".SH NAME\nnb \\- run Nano Bots cartridges: chat, tools, servers and agents\n")
	b.WriteString(".SH SYNOPSIS\n.nf\n")
	for _, line := range strings.Split(strings.TrimSpace(helpText), "\n") {
		if strings.HasPrefix(line, "  nb ") {
			b.WriteString(roffEscape(strings.TrimSpace(line)) + "\n")
		}
		if strings.HasPrefix(line, "eval reads") {
			break
		}
	}
	b.WriteString(".fi\n.SH COMMANDS\n")
	for _, path := range helpPaths {
		fs, err := a.helpSet(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, ".SS \"nb %s\"\n.nf\n", strings.Join(path, " "))
		for _, line := range strings.Split(strings.TrimSpace(fs.Usage), "\n") {
			b.WriteString("\\fB" + roffEscape(strings.TrimSpace(line)) + "\\fR\n")
		}
		b.WriteString(".fi\n")
		if fs.About != "" {
			b.WriteString(".PP\n.nf\n" + roffEscape(strings.TrimSpace(fs.About)) + "\n.fi\n")
		}
		for _, e := range fs.Entries() {
			if e.Names == "-h, --help" {
				continue
			}
			names := "\\fB" + roffEscape(e.Names) + "\\fR"
			if e.Arg != "" {
				names += " \\fI" + roffEscape(e.Arg) + "\\fR"
			}
			text := e.Usage
			if e.Default != "" {
				text += " (default " + e.Default + ")"
			}
			fmt.Fprintf(&b, ".TP\n%s\n%s\n", names, roffEscape(text))
		}
	}
	b.WriteString(".SH ENVIRONMENT\n")
	for _, v := range environment {
		doc := v.Doc
		if v.Commands != "" {
			doc += " (" + v.Commands + ")"
		}
		fmt.Fprintf(&b, ".TP\n\\fB%s\\fR\n%s\n", roffEscape(v.Name), roffEscape(doc))
	}
	b.WriteString(".PP\nA .env file in the working directory fills unset variables (NB_DOTENV=0 turns it off).\n")
	b.WriteString(".SH EXIT STATUS\n0 success, 1 failure, 2 a mistake on the command line, 130 and 143 stopped by SIGINT and SIGTERM.\n")
	b.WriteString(".SH SEE ALSO\nThe documentation in docs/ of nb's source: serve.md, agents.md, gateway.md, security.md.\n")
	_, err := a.Stdout.WriteString(b.String())
	return err
}

// roffEscape keeps text literal in roff: backslashes, dashes (as
// hyphen-minus, so that flags can be copied), and a leading dot or quote.
func roffEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
			line = `\&` + line
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
