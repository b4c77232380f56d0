package function

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/script"
	"github.com/nbots/nb/tool"
)

const cart = `
tools:
  - name: get-current-weather
    parameters:
      type: object
      properties:
        location: {type: string}
        unit: {type: string}
    fennel: |
      (let [{:location location :unit unit} parameters]
        (.. "Here is the weather in " location ", in " unit ": 35.8°C."))
  - name: clock
    lua: return parameters.missing.field
`

// Cartridge tools run their source with parameters in scope; a tool
// without parameters gets the default schema; a runtime error is an
// error the agent turns into the result.
func TestFromCartridge(t *testing.T) {
	c, err := cartridge.Parse([]byte(cart), "test.yml", cartridge.FormatYAML, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	tools := FromCartridge(c, script.New(script.Options{Sandboxed: true}))
	if len(tools) != 2 {
		t.Fatalf("%d tools, want 2", len(tools))
	}
	out, err := tools[0].Run(context.Background(), tool.Call{Name: "get_current_weather", Arguments: map[string]any{"location": "Tokyo, Japan", "unit": "Celsius"}})
	if err != nil || out != "Here is the weather in Tokyo, Japan, in Celsius: 35.8°C." {
		t.Errorf("weather: %#v, %v", out, err)
	}
	sp := tools[1].Spec()
	if sp.Name != "clock" || sp.Parameters["type"] != "object" {
		t.Errorf("clock spec = %+v", sp)
	}
	_, err = tools[1].Run(context.Background(), tool.Call{Name: "clock"})
	var rte *script.RuntimeError
	if !errors.As(err, &rte) {
		t.Errorf("err = %#v, want a runtime error", err)
	}
}
