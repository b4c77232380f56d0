package provider

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nbots/nb/internal/bytesize"
)

// DefaultAnswerLimit is the most nb reads of one answer of a provider,
// streamed or not, unless the context says otherwise (WithAnswerLimit).
const DefaultAnswerLimit int64 = 64 << 20

type answerLimitKey struct{}

// WithAnswerLimit returns a context under which the answers of providers
// are read up to n bytes (DefaultAnswerLimit when n <= 0).
func WithAnswerLimit(ctx context.Context, n int64) context.Context {
	if n <= 0 {
		n = DefaultAnswerLimit
	}
	return context.WithValue(ctx, answerLimitKey{}, n)
}

// AnswerLimit is the most read of one answer under ctx.
func AnswerLimit(ctx context.Context) int64 {
	if n, ok := ctx.Value(answerLimitKey{}).(int64); ok {
		return n
	}
	return DefaultAnswerLimit
}

// ErrAnswerCut is the error of an answer read up to the limit (see
// AnswerCutError).
var ErrAnswerCut = errors.New("the answer was cut")

// AnswerCutError says a provider's answer went past the bytes nb reads
// of one answer: what came before it may be kept, marked as cut.
type AnswerCutError struct {
	Provider string
	Limit    int64
}

func (e *AnswerCutError) Error() string {
	return fmt.Sprintf("%s: the answer is longer than %s, the most nb reads of one answer: it was cut there", e.Provider, bytesize.String(e.Limit))
}

// Notice is what ends an answer kept up to the cut, for its reader.
func (e *AnswerCutError) Notice() string {
	return fmt.Sprintf("\n\n[nb: the answer was cut here: it reached the limit of %s per answer]", bytesize.String(e.Limit))
}

// Is makes errors.Is(err, ErrAnswerCut) true.
func (e *AnswerCutError) Is(target error) bool { return target == ErrAnswerCut }

// cappedBody fails the read past its limit with an *AnswerCutError.
type cappedBody struct {
	io.ReadCloser
	left int64
	err  *AnswerCutError
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, b.err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
