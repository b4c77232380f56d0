package openaiapi

import (
	"strconv"

	"github.com/nbots/nb/internal/jsonstr"
	"github.com/nbots/nb/provider"
)

// The answers are written by hand, field by field in the order OpenAI
// sends them: a chunk is written for every streamed piece, and
// encoding/json's reflection costs more than the rest of the chunk.

// appendString appends s as a JSON string, as encoding/json writes it
// without HTML escaping.
func appendString(dst []byte, s string) []byte { return jsonstr.Append(dst, s) }

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
