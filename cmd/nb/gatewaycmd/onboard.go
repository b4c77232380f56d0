package gatewaycmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/gateway/config"
	"github.com/nbots/nb/internal/atomicfile"
)

// onboardDefaults are the keys nb gateway onboard adds when missing, with
// nanobot's defaults (its Config()): only those whose value is what both
// nanobot and nb assume when the key is absent, so that a refresh changes
// no behaviour (not gateway.host 0.0.0.0, nor restrictToWorkspace false,
// nor memoryWindow, which would).
const onboardDefaults = `{
  "agents": {"defaults": {"workspace": "~/.nanobot/workspace", "model": "anthropic/claude-opus-4-5", "provider": "auto", "maxTokens": 8192, "maxToolIterations": 40}},
  "channels": {"sendProgress": true, "sendToolHints": false},
  "providers": {"custom": {"apiKey": ""}, "anthropic": {"apiKey": ""}, "openai": {"apiKey": ""}, "openrouter": {"apiKey": ""}, "deepseek": {"apiKey": ""}, "groq": {"apiKey": ""},
    "zhipu": {"apiKey": ""}, "dashscope": {"apiKey": ""}, "vllm": {"apiKey": ""}, "gemini": {"apiKey": ""}, "moonshot": {"apiKey": ""}, "minimax": {"apiKey": ""},
    "aihubmix": {"apiKey": ""}, "siliconflow": {"apiKey": ""}, "volcengine": {"apiKey": ""}},
  "gateway": {"port": 18790, "heartbeat": {"enabled": true, "intervalS": 1800}},
  "tools": {"web": {"search": {"apiKey": "", "maxResults": 5}}, "exec": {"timeout": 60, "pathAppend": ""}, "mcpServers": {}}
}`

// gatewayOnboard is nb gateway onboard: nanobot onboard's refresh of an
// existing configuration, in place: the missing keys are added with
// nanobot's defaults, the user's keys and values are kept (in their
// order and spelling, unknown ones too), and the file is replaced
// atomically; then the workspace's missing templates are written.
func (cl *cli) gatewayOnboard(args []string) error {
	fs, f := cl.gatewayFlagSet("nb gateway onboard", "nb gateway onboard [--config FILE] [--workspace DIR]", "Refreshes an existing nanobot configuration in place, as nanobot onboard does:\nadds the missing keys with nanobot's defaults, keeps every value you wrote,\nand writes the workspace's missing templates. nb gateway init writes a new one.")
	if help, err := fs.ParseOnly(args); help || err != nil {
		return err
	}
	env := config.Env(cl.environ)
	path, err := config.Find(*f.config, env)
	if err != nil {
		return err
	}
	if path == "" {
		return errors.New("nb gateway onboard: no configuration to refresh (--config, NB_GATEWAY_CONFIG, $XDG_CONFIG_HOME/nb/gateway.json, ~/.nanobot/config.json): run nb gateway init to write one")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	user, err := readObject(json.NewDecoder(bytes.NewReader(data)))
	if err != nil {
		return fmt.Errorf("%s: %v (nb gateway onboard refreshes a plain JSON configuration, as nanobot writes it; a file with comments is left as it is)", path, err)
	}
	defaults, err := readObject(json.NewDecoder(strings.NewReader(onboardDefaults)))
	if err != nil {
		return err
	}
	var added []string
	merged := mergeObject(user, defaults, "", &added)
	var out bytes.Buffer
	writeObject(&out, merged, "")
	out.WriteByte('\n')
	if len(added) == 0 {
		fmt.Fprintf(cl.stdout, "kept      %s (nothing missing)\n", path)
	} else {
		perm := os.FileMode(0o600)
		if fi, err := os.Stat(path); err == nil {
			perm = fi.Mode().Perm()
		}
		if err := atomicfile.WriteFile(path, out.Bytes(), perm); err != nil {
			return err
		}
		fmt.Fprintf(cl.stdout, "refreshed %s: added %s (your values are kept)\n", path, strings.Join(added, ", "))
	}
	c, err := config.Load(path, *f.workspace, config.Env(append(cl.environ, "ANTHROPIC_API_KEY=", "BRAVE_API_KEY=")))
	if err != nil {
		return err
	}
	written, err := gateway.InitWorkspace(c.Workspace)
	for _, w := range written {
		fmt.Fprintf(cl.stdout, "wrote     %s\n", w)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(cl.stdout, "workspace %s\n", filepath.Clean(c.Workspace))
	return nil
}

// member is a key of a JSON object and its value: an object, or the
// value's JSON as written.
type member struct {
	key   string
	obj   []member // when the value is an object
	raw   json.RawMessage
	isObj bool
}

// readObject reads a JSON object keeping its keys' order.
func readObject(d *json.Decoder) ([]member, error) {
	d.UseNumber()
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	if t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	obj, err := readMembers(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("text after the JSON object")
	}
	return obj, nil
}

// readMembers reads an object's members after its '{', and its '}'.
func readMembers(d *json.Decoder) ([]member, error) {
	obj := []member{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		m := member{key: t.(string)}
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return nil, err
		}
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
			sub := json.NewDecoder(bytes.NewReader(t))
			sub.UseNumber()
			sub.Token() //nolint:errcheck // the '{' just seen
			if m.obj, err = readMembers(sub); err != nil {
				return nil, err
			}
			m.isObj = true
		} else {
			m.raw = raw
		}
		obj = append(obj, m)
	}
	if _, err := d.Token(); err != nil { // '}'
		return nil, err
	}
	return obj, nil
}

// mergeObject adds to user the members of defaults it lacks (a key
// written in snake_case counts as its camelCase), recursing into objects
// both have, and names each added one in added.
func mergeObject(user, defaults []member, path string, added *[]string) []member {
	out := user
	for _, dm := range defaults {
		i := -1
		for j, um := range out {
			if normKey(um.key) == normKey(dm.key) {
				i = j
				break
			}
		}
		p := dm.key
		if path != "" {
			p = path + "." + dm.key
		}
		switch {
		case i < 0:
			out = append(out, dm)
			*added = append(*added, p)
		case out[i].isObj && dm.isObj:
			out[i].obj = mergeObject(out[i].obj, dm.obj, p, added)
		}
	}
	return out
}

// normKey is a key as nanobot's pydantic aliases read it (snake_case and
// camelCase alike).
func normKey(k string) string { return strings.ToLower(strings.ReplaceAll(k, "_", "")) }

// writeObject writes obj indented by two spaces, as nanobot's
// save_config does.
func writeObject(w *bytes.Buffer, obj []member, indent string) {
	if len(obj) == 0 {
		w.WriteString("{}")
		return
	}
	w.WriteString("{\n")
	for i, m := range obj {
		key, _ := json.Marshal(m.key)
		w.WriteString(indent + "  ")
		w.Write(key)
		w.WriteString(": ")
		if m.isObj {
			writeObject(w, m.obj, indent+"  ")
		} else {
			var v bytes.Buffer
			if json.Indent(&v, m.raw, indent+"  ", "  ") == nil {
				w.Write(v.Bytes())
			} else {
				w.Write(m.raw)
			}
		}
		if i < len(obj)-1 {
			w.WriteByte(',')
		}
		w.WriteByte('\n')
	}
	w.WriteString(indent + "}")
}
