package cartridge

import (
	"strings"
	"testing"
	"time"
)

func TestFunctionLimits(t *testing.T) {
	src := "provider:\n  id: openai\nsafety:\n  functions:\n    sandboxed: false\n    limits:\n      cpu-seconds: 2.5\n      memory: 128\n      timeout: 30\n"
	c, err := Parse([]byte(src), "bot.yml", FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := FunctionLimits{CPUSeconds: 2.5, Memory: 128 << 20, Timeout: 30 * time.Second}
	if got := c.FunctionLimits(); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// Unset: zero, the runtime's defaults.
	c, err = Parse([]byte("provider:\n  id: openai\nsafety:\n  functions:\n    limits:\n      memory: 0.5\n"), "bot.yml", FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.FunctionLimits(); got != (FunctionLimits{Memory: 1 << 19}) {
		t.Errorf("got %+v", got)
	}
	if got := Default(nil).FunctionLimits(); got != (FunctionLimits{}) {
		t.Errorf("default cartridge: %+v", got)
	}
}

func TestFunctionLimitsErrors(t *testing.T) {
	for limits, want := range map[string]string{
		"limits: 5":                      "bot.yml:6: safety.functions.limits: must be a mapping of keys, not a number",
		"limits:\n      memory: lots":    "bot.yml:7: safety.functions.limits.memory: must be a number of MiB, not text",
		"limits:\n      timeout: -1":     "bot.yml:7: safety.functions.limits.timeout: must be a number of seconds above 0, not -1",
		"limits:\n      cpu-seconds: 0":  "bot.yml:7: safety.functions.limits.cpu-seconds: must be a number of seconds above 0, not 0",
		"limits:\n      cpu: 2":          `bot.yml:7: safety.functions.limits.cpu: unknown limit (known: cpu-seconds, memory, timeout)`,
		"limits:\n      memory: 2000000": "bot.yml:7: safety.functions.limits.memory: must be at most 1048576 MiB, not 2000000",
	} {
		src := "provider:\n  id: openai\nsafety:\n  functions:\n    sandboxed: true\n    " + limits + "\n"
		_, err := Parse([]byte(src), "bot.yml", FormatYAML, nil)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", limits, err, want)
		}
	}
}
