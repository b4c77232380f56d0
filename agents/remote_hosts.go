package agents

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// LoadRemote reads a file of remote agent servers, one per line:
//
//	# host[:port]            token (optional)
//	agents.example.com       ENV/EXAMPLE_AGENTS_TOKEN
//	127.0.0.1:4000
//
// A listed host may be named in the minions a client sends; its token,
// when given (literally, or ENV/NAME read through env), is sent to that
// host only. Errors name the file and the line, never a token.
func LoadRemote(path string, env func(string) (string, bool)) (Remote, error) {
	r := Remote{Tokens: map[string]string{}}
	f, err := os.Open(path)
	if err != nil {
		return r, fmt.Errorf("agent hosts: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) > 2 {
			return r, fmt.Errorf("%s:%d: write a host and at most a token (host[:port] [token or ENV/NAME])", path, n)
		}
		host := fields[0]
		if err := CheckHost(host); err != nil {
			return r, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		r.AllowHosts = append(r.AllowHosts, host)
		if len(fields) == 2 {
			token := fields[1]
			if name, ok := strings.CutPrefix(token, "ENV/"); ok {
				v, set := "", false
				if env != nil {
					v, set = env(name)
				}
				if !set || strings.TrimSpace(v) == "" {
					return r, fmt.Errorf("%s:%d: the token of %s is ENV/%s, but %s is not set", path, n, host, name, name)
				}
				token = strings.TrimSpace(v)
			}
			r.Tokens[host] = token
		}
	}
	if err := sc.Err(); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// CheckHost says why host is not a host or host:port that clients may
// name as a minion's server (nil when it is one).
func CheckHost(host string) error {
	if u, err := url.Parse("ws://" + host); err != nil || host == "" || u.Host != host || u.Path != "" {
		return fmt.Errorf("%q is not a host or host:port", host)
	}
	return nil
}

// Merge adds the hosts and tokens of o to r.
func (r *Remote) Merge(o Remote) {
	r.AllowHosts = append(r.AllowHosts, o.AllowHosts...)
	for h, t := range o.Tokens {
		if r.Tokens == nil {
			r.Tokens = map[string]string{}
		}
		r.Tokens[h] = t
	}
}
