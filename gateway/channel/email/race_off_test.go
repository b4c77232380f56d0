//go:build !race

package email

const raceOn = false
