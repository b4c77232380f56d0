// Package layout holds no code: its tests check the rules of the tree's
// layout that a reviewer would otherwise check by hand (which package may
// import which), so a change that breaks one fails in CI.
package layout
