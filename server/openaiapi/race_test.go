//go:build race

package openaiapi

// raceEnabled is set when the tests run under the race detector, which
// makes the timed tests several times slower.
const raceEnabled = true
