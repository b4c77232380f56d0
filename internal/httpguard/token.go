package httpguard

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/nbots/nb/admission"
)

// MinTokenLength is the shortest secret a token may have.
const MinTokenLength = 16

// Token is a credential clients send as "Authorization: Bearer <secret>"
// (what every OpenAI SDK sends as its API key), with what it may do. The
// secret itself is never kept: only its SHA-256, compared in constant time.
type Token struct {
	// Name identifies the token in logs and separates its clients' end
	// users; "" for the server's single token (NB_SERVE_TOKEN).
	Name string
	// Cartridges are the ids the token may use, as path.Match patterns
	// ("writer", "team/*", "-"); nil allows every cartridge.
	Cartridges []string
	// Rate bounds the runs the token may start; the zero Rate is unlimited.
	Rate Rate
	// MaxRuns bounds the token's concurrent runs; 0 takes the server's
	// --max-runs-per-token.
	MaxRuns int

	hash   [sha256.Size]byte
	tenant admission.Tenant // its runs and its rate's bucket
}

// Tenant is the token's running count and rate bucket, for the admission
// limits of the server that accepted it.
func (t *Token) Tenant() *admission.Tenant { return &t.tenant }

// NewToken returns a token named name for secret, allowing every
// cartridge without a rate limit.
func NewToken(name, secret string) (*Token, error) {
	if len(secret) < MinTokenLength {
		return nil, fmt.Errorf("the token is %d characters long: use at least %d random characters (for example: openssl rand -hex 32)", len(secret), MinTokenLength)
	}
	return &Token{Name: name, hash: sha256.Sum256([]byte(secret))}, nil
}

// Allows reports whether the token may use the cartridge id.
func (t *Token) Allows(id string) bool {
	if t == nil || t.Cartridges == nil {
		return true
	}
	for _, p := range t.Cartridges {
		if ok, _ := path.Match(p, id); ok {
			return true
		}
	}
	return false
}

// Rate is a number of runs per period.
type Rate = admission.Rate

// ParseRate reads a rate written N/second, N/minute or N/hour (or s, m,
// h); "" is unlimited.
func ParseRate(s string) (Rate, error) { return admission.ParseRate(s) }

// AuthError is why a request carries no valid token; servers answer it
// with 401.
type AuthError struct {
	// Message says what is wrong and what to send.
	Message string
}

func (e *AuthError) Error() string { return e.Message }

// Authenticate returns the token whose secret is the request's bearer
// token, or an *AuthError. Every token is compared, in constant time, so
// the time taken says nothing about which one came close.
func Authenticate(tokens []*Token, r *http.Request) (*Token, error) {
	sum, ok := bearerSum(r)
	if !ok {
		return nil, &AuthError{Message: "this server needs a token: send it as \"Authorization: Bearer <token>\" (an OpenAI client's API key)"}
	}
	var found *Token
	for _, t := range tokens {
		if subtle.ConstantTimeCompare(sum[:], t.hash[:]) == 1 {
			found = t
		}
	}
	if found == nil {
		return nil, &AuthError{Message: "the token is not valid for this server"}
	}
	return found, nil
}

// bearerSum is the SHA-256 of the request's bearer token: the secret of
// "Authorization: Bearer <secret>", the scheme in any case (RFC 9110
// section 11.1), the spaces around the secret left out. ok is false
// without one. Digests of equal length make the comparisons that follow
// take the same time whatever the secret sent, its length included.
func bearerSum(r *http.Request) (sum [sha256.Size]byte, ok bool) {
	auth := r.Header.Get("Authorization")
	scheme, secret, _ := strings.Cut(auth, " ")
	secret = strings.TrimSpace(secret)
	if !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return sum, false
	}
	return sha256.Sum256([]byte(secret)), true
}

// Bearer is the check of a server with one secret of any length (nb mcp
// serve's token, the robopages API's, a metrics listener's): it reports
// whether a request carries "Authorization: Bearer <secret>", read as
// Authenticate reads it and compared in constant time. Only the secret's
// SHA-256 is kept. An empty secret allows no request.
func Bearer(secret string) func(*http.Request) bool {
	want := sha256.Sum256([]byte(secret))
	return func(r *http.Request) bool {
		sum, ok := bearerSum(r)
		return subtle.ConstantTimeCompare(sum[:], want[:]) == 1 && ok && secret != ""
	}
}

// LoadTokens reads a tokens file:
//
//	tokens:
//	  - name: editor            # required, unique: logs and end users
//	    token: 6f0c…            # the secret (16 characters or more), or
//	    sha256: 9f86…           # its SHA-256 in hex, to keep no secret here
//	    cartridges: [writer, "team/*"]  # ids it may use (default: all)
//	    rate: 60/minute         # runs it may start (default: unlimited)
//	    concurrent: 2           # runs at once (default: --max-runs-per-token)
//
// Errors name the file and the entry; they never quote the file, which
// holds secrets.
func LoadTokens(file string) ([]*Token, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("tokens file %s: %v", file, err)
	}
	return ParseTokens(data, file)
}

// ParseTokens reads the text of a tokens file (see LoadTokens); name is
// used in messages.
func ParseTokens(data []byte, name string) ([]*Token, error) {
	var doc struct {
		Tokens []struct {
			Name       string   `yaml:"name"`
			Token      string   `yaml:"token"`
			SHA256     string   `yaml:"sha256"`
			Cartridges []string `yaml:"cartridges"`
			Rate       string   `yaml:"rate"`
			Concurrent int      `yaml:"concurrent"`
		} `yaml:"tokens"`
	}
	if err := yaml.UnmarshalWithOptions(data, &doc, yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("tokens file %s: %s", name, yamlMessage(err))
	}
	if len(doc.Tokens) == 0 {
		return nil, fmt.Errorf("tokens file %s: no tokens: list them under tokens: (see docs/serve.md)", name)
	}
	seen := map[string]bool{}
	var out []*Token
	for i, e := range doc.Tokens {
		where := fmt.Sprintf("tokens file %s: tokens[%d]", name, i)
		if e.Name != "" {
			where += " (" + e.Name + ")"
		}
		if strings.TrimSpace(e.Name) == "" {
			return nil, fmt.Errorf("%s: name is missing: every token needs a name, used in logs", where)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("%s: the name %q is used twice", where, e.Name)
		}
		seen[e.Name] = true
		var t *Token
		switch {
		case e.Token != "" && e.SHA256 != "":
			return nil, fmt.Errorf("%s: give token or sha256, not both", where)
		case e.Token != "":
			var err error
			if t, err = NewToken(e.Name, e.Token); err != nil {
				return nil, fmt.Errorf("%s: token: %v", where, err)
			}
		case e.SHA256 != "":
			b, err := hex.DecodeString(strings.TrimSpace(e.SHA256))
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("%s: sha256 must be 64 hexadecimal digits (printf %%s TOKEN | sha256sum)", where)
			}
			t = &Token{Name: e.Name}
			copy(t.hash[:], b)
		default:
			return nil, fmt.Errorf("%s: token is missing: give the secret as token, or its SHA-256 as sha256", where)
		}
		for _, p := range e.Cartridges {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("%s: cartridges: %q is not a valid pattern", where, p)
			}
		}
		if e.Cartridges != nil {
			t.Cartridges = append([]string{}, e.Cartridges...)
		}
		rate, err := ParseRate(e.Rate)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		t.Rate = rate
		if e.Concurrent < 0 {
			return nil, fmt.Errorf("%s: concurrent must be a positive number of runs", where)
		}
		t.MaxRuns = e.Concurrent
		out = append(out, t)
	}
	for i, a := range out {
		for _, b := range out[i+1:] {
			if a.hash == b.hash {
				return nil, fmt.Errorf("tokens file %s: %s and %s have the same secret", name, a.Name, b.Name)
			}
		}
	}
	return out, nil
}

// yamlMessage is a YAML error without the source excerpt (a tokens file
// holds secrets).
func yamlMessage(err error) string {
	var se *yaml.SyntaxError
	if errors.As(err, &se) && se.Token != nil {
		return fmt.Sprintf("line %d: %s", se.Token.Position.Line, se.Message)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		// goccy's messages put the excerpt after the first line.
		msg = msg[:strings.Index(msg, "\n")]
	}
	if i := strings.Index(msg, "] "); strings.HasPrefix(msg, "[") && i > 0 {
		return "line " + strings.SplitN(msg[1:i], ":", 2)[0] + ": " + msg[i+2:]
	}
	return msg
}
