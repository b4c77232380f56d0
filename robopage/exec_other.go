//go:build !unix

package robopage

import "os"

func exitText(state *os.ProcessState) string { return state.String() }
