package fileruns_test

import (
	"testing"

	"github.com/nbots/nb/pipeline/runstore"
	"github.com/nbots/nb/pipeline/runstore/fileruns"
	"github.com/nbots/nb/pipeline/runstore/runstoretest"
)

// TestConformance runs the run store suite on folders.
func TestConformance(t *testing.T) {
	runstoretest.Run(t, runstoretest.Harness{
		New: func(t *testing.T) func() runstore.Store {
			root := t.TempDir()
			return func() runstore.Store {
				s, err := fileruns.Open(root)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		},
		Crash:    fileruns.Crash,
		Synctest: true,
	})
}
