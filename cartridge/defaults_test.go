package cartridge

import (
	"os"
	"reflect"
	"testing"

	"github.com/goccy/go-yaml"
)

// TestDefaultsMatchYAML holds Defaults' Go values to defaults.yml, the
// specification's defaults as YAML, parsed as a cartridge is.
func TestDefaultsMatchYAML(t *testing.T) {
	src, err := os.ReadFile("defaults.yml")
	if err != nil {
		t.Fatal(err)
	}
	var raw yaml.MapSlice
	if err := yaml.UnmarshalWithOptions(src, &raw, yaml.UseOrderedMap()); err != nil {
		t.Fatal(err)
	}
	want := toPlain(raw)
	if got := Defaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("Defaults() = %#v\nwant (defaults.yml) %#v", got, want)
	}
}
