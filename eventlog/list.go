package eventlog

import "time"

// Summary is what a listing shows of a kept value, for the server's
// operator (the control page): what it is about and how it stands, never
// its contents.
type Summary struct {
	// Label says what the value is of: a response's model, a run's agent.
	Label string `json:"label,omitempty"`
	// Status is how it stands: completed, failed, running ...
	Status string `json:"status,omitempty"`
	// Created is when the thing it records began (zero: unknown).
	Created time.Time `json:"created,omitzero"`
	// Tokens it used, input and output, when known.
	Tokens int `json:"tokens,omitempty"`
}

// Entry is a value in a listing.
type Entry struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	// Put is when the value was last put.
	Put time.Time `json:"put"`
	// Size is the bytes it takes in its store.
	Size int64 `json:"size"`
	Summary
}

// MaxList is the most entries a listing returns, whatever it asks.
const MaxList = 1000

// listLimit bounds the limit a listing asks: at least 1, at most MaxList.
func listLimit(limit int) int {
	return min(max(limit, 1), MaxList)
}
