package fileruns

import (
	"testing"

	"github.com/nbots/nb/pipeline/runstore"
)

// Crash drops a run's lock as its process dying would.
func Crash(t *testing.T, r runstore.Run) { r.(*run).crash() }
