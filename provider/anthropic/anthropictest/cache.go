package anthropictest

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
)

// PromptCache simulates the API's prompt cache as its documentation
// describes it (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching):
// a request is a sequence of blocks in the order tools, system, messages;
// a block with cache_control is a breakpoint, and the prefix up to a
// breakpoint is written to the cache. A later request whose prefix up to
// one of its breakpoints is byte-identical (cache_control aside) reads it.
// Usage then reports cache_read_input_tokens for the longest cached
// prefix, cache_creation_input_tokens for what the request's last
// breakpoint adds beyond it, and input_tokens for the rest. Tokens are
// estimated as a quarter of the blocks' JSON bytes.
type PromptCache struct {
	mu     sync.Mutex
	stored map[[32]byte]bool
}

// CacheUsage is one request's usage as the cache makes it.
type CacheUsage struct {
	Input, CacheCreation, CacheRead int
}

// Use computes the usage of a request body and writes its breakpoints.
func (c *PromptCache) Use(body []byte) CacheUsage {
	var req struct {
		Tools    []map[string]any `json:"tools"`
		System   any              `json:"system"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	var blocks []map[string]any
	blocks = append(blocks, req.Tools...)
	add := func(role string, content any) {
		switch t := content.(type) {
		case string:
			if t != "" {
				blocks = append(blocks, map[string]any{"role": role, "type": "text", "text": t})
			}
		case []any:
			for _, b := range t {
				if m, ok := b.(map[string]any); ok {
					m = clone(m)
					m["role"] = role
					blocks = append(blocks, m)
				}
			}
		}
	}
	add("system", req.System)
	for _, m := range req.Messages {
		add(m.Role, m.Content)
	}

	h := sha256.New()
	total := 0
	var breakpoints []struct {
		key    [32]byte
		tokens int
	}
	for _, b := range blocks {
		_, marked := b["cache_control"]
		delete(b, "cache_control")
		data, _ := json.Marshal(b)
		h.Write(data)
		total += (len(data) + 3) / 4
		if marked {
			var key [32]byte
			copy(key[:], h.Sum(nil))
			breakpoints = append(breakpoints, struct {
				key    [32]byte
				tokens int
			}{key, total})
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stored == nil {
		c.stored = map[[32]byte]bool{}
	}
	read := 0
	for _, bp := range breakpoints {
		if c.stored[bp.key] && bp.tokens > read {
			read = bp.tokens
		}
	}
	written := 0
	if n := len(breakpoints); n > 0 && breakpoints[n-1].tokens > read {
		written = breakpoints[n-1].tokens - read
	}
	for _, bp := range breakpoints {
		c.stored[bp.key] = true
	}
	return CacheUsage{Input: total - read - written, CacheCreation: written, CacheRead: read}
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
