//go:build race

package email

// raceOn: the race detector slows everything several times over, so
// timing bounds are only logged.
const raceOn = true
