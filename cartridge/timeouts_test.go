package cartridge

import (
	"testing"
	"time"
)

func TestTimeouts(t *testing.T) {
	env := func(name string) (string, bool) { v, ok := map[string]string{"IDLE": "90"}[name]; return v, ok }
	c, err := Parse([]byte("provider:\n  id: openai\n  timeouts:\n    connect: 5\n    first-byte: 1.5\n    idle: ENV/IDLE\n"), "bot.yml", FormatYAML, env)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Timeouts()
	if err != nil || got != (Timeouts{Connect: 5 * time.Second, FirstByte: 1500 * time.Millisecond, Idle: 90 * time.Second}) {
		t.Fatalf("%+v %v", got, err)
	}
	for src, want := range map[string]Timeouts{
		"provider:\n  id: openai\n":                                   {},
		"provider:\n  id: openai\n  timeouts:\n":                      {},
		"provider:\n  id: openai\n  timeouts:\n    idle: null\n":      {},
		"provider:\n  id: openai\n  timeouts:\n    first-byte: 600\n": {FirstByte: 10 * time.Minute},
	} {
		c, err := Parse([]byte(src), "bot.yml", FormatYAML, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.Timeouts(); err != nil || got != want {
			t.Errorf("%q: %+v %v", src, got, err)
		}
	}
}

func TestTimeoutsErrors(t *testing.T) {
	for src, want := range map[string]string{
		"provider:\n  id: openai\n  timeouts: 30\n":                 "bot.yml:3: provider.timeouts: must be a mapping of connect, first-byte and idle to seconds, not a number",
		"provider:\n  id: openai\n  timeouts:\n    firstbyte: 3\n":  "bot.yml:4: provider.timeouts.firstbyte: unknown time limit: did you mean \"first-byte\"? (known: connect, first-byte, idle)",
		"provider:\n  id: openai\n  timeouts:\n    idle: -1\n":      "bot.yml:4: provider.timeouts.idle: must be a number of seconds above 0 (for example 120), not -1",
		"provider:\n  id: openai\n  timeouts:\n    connect: soon\n": "bot.yml:4: provider.timeouts.connect: must be a number of seconds above 0 (for example 120), not soon",
		"provider:\n  id: openai\n  timeouts:\n    connect: 0\n":    "bot.yml:4: provider.timeouts.connect: must be a number of seconds above 0 (for example 120), not 0",
	} {
		c, err := Parse([]byte(src), "bot.yml", FormatYAML, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Timeouts(); err == nil || err.Error() != want {
			t.Errorf("%q:\n got %v\nwant %s", src, err, want)
		}
	}
}
