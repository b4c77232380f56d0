package metric

import (
	"os"
	"strings"
	"testing"
)

// TestDocsListEveryMetric keeps docs/observability.md's table true.
func TestDocsListEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Names() {
		if strings.HasPrefix(name, "nb_test_") {
			continue // this package's tests' own
		}
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("docs/observability.md does not list %s", name)
		}
	}
}
