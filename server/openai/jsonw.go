package openai

import (
	"strconv"
	"unicode/utf8"

	"github.com/nbots/nb/provider"
)

// The answers are written by hand, field by field in the order OpenAI
// sends them: a chunk is written for every streamed piece, and
// encoding/json's reflection costs more than the rest of the chunk.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, as encoding/json writes it
// without HTML escaping: invalid UTF-8 becomes U+FFFD, and U+2028 and
// U+2029 are escaped (JavaScript reads them as line ends).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

func itoa(n int) string { return strconv.Itoa(n) }

// appendUsage appends chat completions' usage object.
func appendChatUsage(dst []byte, u provider.Usage) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = appendInt(dst, int64(u.InputTokens))
	dst = append(dst, `,"completion_tokens":`...)
	dst = appendInt(dst, int64(u.OutputTokens))
	dst = append(dst, `,"total_tokens":`...)
	dst = appendInt(dst, int64(u.InputTokens+u.OutputTokens))
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = appendInt(dst, int64(u.CacheReadTokens))
	dst = append(dst, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":`...)
	dst = appendInt(dst, int64(u.ReasoningTokens))
	dst = append(dst, `,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
	return dst
}
