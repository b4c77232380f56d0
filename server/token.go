package server

import (
	"net/http"

	"github.com/nbots/nb/admission"
	"github.com/nbots/nb/internal/httpguard"
)

// MinTokenLength is the shortest secret a token may have.
const MinTokenLength = httpguard.MinTokenLength

// Token is a credential clients send as "Authorization: Bearer <secret>";
// see httpguard.Token.
type Token = httpguard.Token

// Rate is a number of runs per period.
type Rate = admission.Rate

// NewToken returns a token named name for secret, allowing every
// cartridge without a rate limit.
func NewToken(name, secret string) (*Token, error) { return httpguard.NewToken(name, secret) }

// ParseRate reads a rate written N/second, N/minute or N/hour (or s, m,
// h); "" is unlimited.
func ParseRate(s string) (Rate, error) { return admission.ParseRate(s) }

// LoadTokens reads a tokens file; see httpguard.LoadTokens.
func LoadTokens(file string) ([]*Token, error) { return httpguard.LoadTokens(file) }

// authenticate is httpguard.Authenticate with its failure as the 401
// this server answers.
func authenticate(tokens []*Token, r *http.Request) (*Token, *Error) {
	t, err := httpguard.Authenticate(tokens, r)
	if err != nil {
		return nil, &Error{Status: http.StatusUnauthorized, Message: err.Error()}
	}
	return t, nil
}
