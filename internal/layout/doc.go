// Package layout holds no code: its tests check the rules of the tree's
// layout that a reviewer would otherwise check by hand (which package may
// import which, what the gateway may not touch, that no library error
// names a command-line flag), so a change that breaks one fails in CI.
package layout
