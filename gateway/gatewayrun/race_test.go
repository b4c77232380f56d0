//go:build race

package gatewayrun

const raceEnabled = true
