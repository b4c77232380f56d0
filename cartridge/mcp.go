package cartridge

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"
)

// MCPServer is one entry of the cartridge's mcp key: an MCP server whose
// tools the bot can call, in the shape Claude Desktop, Cursor and
// nanobot use (command, args, env for a local server; url, headers for a
// remote one).
type MCPServer struct {
	// Name is the server's key, as written (io.github.someone/server-x).
	Name string
	// Prefix is what its tools' names start with (<Prefix>__<tool>):
	// Name when it is made of letters, digits, '_' and '-' without "__",
	// else a valid name made from it (see MCP).
	Prefix string
	// ToolPrefix, when set (the server's tool-prefix key), is the whole
	// start of its tools' names instead of <Prefix>__: mcp_<server>_ for
	// nanobot's names.
	ToolPrefix string
	// Command, Args, Env and Dir describe a server run as a child process
	// that speaks MCP on its standard input and output. Env holds only
	// the variables the cartridge sets; Dir is relative to the
	// cartridge's folder ("" for that folder).
	Command string
	Args    []string
	Env     map[string]string
	Dir     string
	// URL and Headers describe a remote server.
	URL     string
	Headers map[string]string
	// Transport is "stdio" for a command, "http" (streamable HTTP) or
	// "sse" (the legacy HTTP+SSE transport) when the cartridge says so,
	// and "" for a URL whose transport is to be found out (streamable
	// HTTP, then SSE).
	Transport string
	// Tools is the allow-list of the server's tool names (as the server
	// spells them); nil allows every tool, an empty list none.
	Tools []string
	// Timeout bounds one tool call; 30 seconds unless the cartridge says
	// otherwise.
	Timeout time.Duration
	// Disabled servers are listed but not started.
	Disabled bool
	// Display is the command line or the URL as the cartridge writes it:
	// ENV references are shown by name, never by value.
	Display string
	// Missing lists the ENV references of this server whose variable is
	// not set; a server with any cannot start.
	Missing []EnvRef
	// File and Line locate the server's key, for messages.
	File string
	Line int
}

// Where returns "file:line" of the server's key.
func (s MCPServer) Where() string {
	if s.Line > 0 {
		return fmt.Sprintf("%s:%d", displayName(s.File), s.Line)
	}
	return displayName(s.File)
}

// DefaultMCPTimeout is how long one MCP tool call may take unless the
// server's timeout key says otherwise.
const DefaultMCPTimeout = 30 * time.Second

// mcpName is what a server name may be: it becomes the prefix of tool
// names, which providers limit to letters, digits, '_' and '-'.
var mcpName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`) })
var mcpKeys = []string{"command", "args", "env", "cwd", "url", "headers", "type", "tools", "timeout", "disabled", "tool-prefix"}

// MCP returns the servers of the cartridge's mcp key, in file order,
// after checking them: a problem is an *Error naming the file, the line
// and the key. env resolves the ENV references that stand as a word
// inside a longer value of args, env or headers ("Bearer ENV/TOKEN");
// references that are a whole value were resolved when the cartridge was
// loaded. Pass the lookup the cartridge was loaded with.
func (c *Cartridge) MCP(env Lookup) ([]MCPServer, error) {
	v, ok := c.Data["mcp"]
	if !ok || v == nil {
		return nil, nil
	}
	k := &checker{c: c}
	m, isMap := v.(map[string]any)
	if !isMap {
		k.fail("mcp", "must be a mapping of server names to their settings (command and args, or url), not %s", kind(v))
		return nil, k.err
	}
	var out []MCPServer
	order := c.mcpOrder(m)
	prefixes := mcpPrefixes(order)
	for _, name := range order {
		s := c.mcpServer(k, name, m[name], env)
		if k.err != nil {
			return nil, k.err
		}
		s.Prefix = prefixes[name]
		out = append(out, s)
	}
	return out, nil
}

// mcpPrefixes maps server names, as users paste them from registries and
// other tools' configurations (io.github.someone/server-x, docs.example),
// to the prefixes of their tools' names, which providers limit to
// letters, digits, '_' and '-', and which "__" separates from the tool's
// own name. A name already valid is its own prefix; another becomes its
// valid characters, each run of others one '_' (io_github_someone_server-x),
// and when that is taken by another server of the cartridge, it gets the
// start of its name's SHA-256 too: the prefix depends only on the names,
// never on their order or on the process.
func mcpPrefixes(names []string) map[string]string {
	out := make(map[string]string, len(names))
	taken := map[string]bool{}
	for _, n := range names {
		if mcpName().MatchString(n) && !strings.Contains(n, "__") {
			out[n] = n
			taken[strings.ToLower(n)] = true
		}
	}
	for _, n := range names {
		if _, ok := out[n]; ok {
			continue
		}
		var b strings.Builder
		under := false
		for _, r := range n {
			ok := r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-')
			switch {
			case ok:
				b.WriteRune(r)
				under = false
			case !under:
				b.WriteByte('_')
				under = true
			}
		}
		p := strings.Trim(b.String(), "_-")
		if p == "" {
			p = "mcp"
		}
		if taken[strings.ToLower(p)] {
			sum := sha256.Sum256([]byte(n))
			p += "_" + hex.EncodeToString(sum[:3])
		}
		taken[strings.ToLower(p)] = true
		out[n] = p
	}
	return out
}

// mcpOrder lists the server names in the order the file gives them.
func (c *Cartridge) mcpOrder(m map[string]any) []string {
	var order []string
	for _, item := range c.Raw {
		if fmt.Sprint(item.Key) != "mcp" {
			continue
		}
		if ms, ok := item.Value.(yaml.MapSlice); ok {
			for _, s := range ms {
				if name := fmt.Sprint(s.Key); hasKey(m, name) {
					order = append(order, name)
				}
			}
		}
	}
	if len(order) != len(m) { // not from the raw mapping (tests build Data directly)
		order = sortedKeys(m)
	}
	return order
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

func (c *Cartridge) mcpServer(k *checker, name string, v any, env Lookup) MCPServer {
	path := "mcp." + name
	s := MCPServer{Name: name, File: c.Path, Line: c.lineOf(path), Timeout: DefaultMCPTimeout}
	if strings.TrimSpace(name) == "" {
		k.fail(path, "a server needs a name: give it one")
		return s
	}
	m, ok := v.(map[string]any)
	if !ok {
		k.fail(path, "must be a mapping with command (and args, env) or url (and headers), not %s", kind(v))
		return s
	}
	for _, key := range sortedKeys(m) {
		if !slices.Contains(mcpKeys, key) {
			k.fail(join(path, key), "unknown key%s", nearestOrKnown(key, mcpKeys))
			return s
		}
	}
	c.mcpMissing(&s, path)

	str := func(key string) string {
		x, ok := m[key]
		if !ok || x == nil {
			return ""
		}
		switch x.(type) {
		case map[string]any, []any, bool:
			k.fail(join(path, key), "must be text, not %s", kind(x))
			return ""
		}
		return text(x)
	}
	s.Command, s.URL, s.Dir = str("command"), str("url"), str("cwd")
	kindKey := str("type")
	if k.err != nil {
		return s
	}
	_, hasCommand := m["command"]
	_, hasURL := m["url"]
	switch {
	case hasCommand && hasURL:
		k.fail(path, "has both command and url: a server is either a program nb runs (command) or a remote one (url)")
		return s
	case !hasCommand && !hasURL:
		k.fail(path, "needs command (a program that speaks MCP on its standard input and output) or url (a remote server)")
		return s
	}
	if b, ok := m["disabled"]; ok && b != nil {
		if t, isBool := b.(bool); isBool {
			s.Disabled = t
		} else {
			k.fail(join(path, "disabled"), "must be true or false, not %s", kind(b))
			return s
		}
	}

	if hasCommand {
		if s.Command == "" && !c.missing(path+".command") {
			k.fail(join(path, "command"), "must name a program")
			return s
		}
		for _, key := range []string{"url", "headers"} {
			if _, ok := m[key]; ok {
				k.fail(join(path, key), "applies to url servers; this one has a command")
				return s
			}
		}
		switch kindKey {
		case "", "stdio":
		default:
			k.fail(join(path, "type"), "must be stdio for a command server, not %q", kindKey)
			return s
		}
		s.Transport = "stdio"
		s.Args = c.mcpList(k, m, path, "args", env, &s)
		s.Env = c.mcpMap(k, m, path, "env", env, &s)
		s.Display = c.mcpDisplay(path, s)
	} else {
		for _, key := range []string{"args", "env", "cwd"} {
			if _, ok := m[key]; ok {
				k.fail(join(path, key), "applies to command servers; this one has a url")
				return s
			}
		}
		if s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			k.fail(join(path, "url"), "must be an http:// or https:// URL, not %q", s.URL)
			return s
		}
		if s.URL == "" && !c.missing(path+".url") {
			k.fail(join(path, "url"), "must be an http:// or https:// URL")
			return s
		}
		switch kindKey {
		case "":
		case "http", "streamable-http", "streamable_http", "streamableHttp", "streamable":
			s.Transport = "http"
		case "sse":
			s.Transport = "sse"
		default:
			k.fail(join(path, "type"), "must be http (streamable HTTP) or sse (the legacy HTTP+SSE transport), not %q", kindKey)
			return s
		}
		s.Headers = c.mcpMap(k, m, path, "headers", env, &s)
		s.Display = s.URL
		if raw := c.RawString("mcp", name, "url"); raw != s.URL && raw != "" {
			s.Display = raw
		}
	}

	if t, ok := m["tools"]; ok {
		switch list := t.(type) {
		case nil:
		case []any:
			s.Tools = []string{}
			for i, x := range list {
				name, isText := x.(string)
				if !isText || name == "" {
					k.fail(fmt.Sprintf("%s.tools[%d]", path, i), "must be a tool name, not %s", kind(x))
					return s
				}
				if name == "*" {
					s.Tools = nil
					break
				}
				s.Tools = append(s.Tools, name)
			}
		default:
			k.fail(join(path, "tools"), "must be a list of the tool names to offer, not %s", kind(t))
			return s
		}
	}
	if t, ok := m["tool-prefix"]; ok && t != nil {
		prefix, isText := t.(string)
		if !isText || strings.TrimSpace(prefix) == "" {
			k.fail(join(path, "tool-prefix"), "must be the text the server's tools' names start with (e.g. mcp_files_), not %v", t)
			return s
		}
		s.ToolPrefix = prefix
	}
	if t, ok := m["timeout"]; ok && t != nil {
		var secs float64
		switch n := t.(type) {
		case int64:
			secs = float64(n)
		case float64:
			secs = n
		default:
			secs = -1
		}
		if secs <= 0 {
			k.fail(join(path, "timeout"), "must be a number of seconds above 0, not %v", t)
			return s
		}
		s.Timeout = time.Duration(secs * float64(time.Second))
	}
	return s
}

// missing reports whether the value at path was an ENV reference whose
// variable is not set.
func (c *Cartridge) missing(path string) bool {
	_, ok := c.MissingFor(path)
	return ok
}

// mcpMissing records the unset ENV references below path.
func (c *Cartridge) mcpMissing(s *MCPServer, path string) {
	for _, m := range c.Missing {
		if m.Path == path || strings.HasPrefix(m.Path, path+".") || strings.HasPrefix(m.Path, path+"[") {
			s.Missing = append(s.Missing, m)
		}
	}
}

// resolveWords substitutes the ENV references that stand as words of a
// longer value ("Bearer ENV/TOKEN"); the value at path is left alone when
// it was itself a reference (already resolved at load time).
func (c *Cartridge) resolveWords(s *MCPServer, path, value string, env Lookup) string {
	for _, r := range c.EnvRefs {
		if r.Path == path {
			return value
		}
	}
	if !strings.Contains(value, "ENV") {
		return value
	}
	words := strings.Split(value, " ")
	changed := false
	for i, w := range words {
		name, ok := EnvVar(w)
		if !ok {
			continue
		}
		val, set := "", false
		if env != nil {
			val, set = env(name)
		}
		if !set {
			s.Missing = append(s.Missing, EnvRef{Path: path, Var: name})
			continue
		}
		words[i], changed = val, true
	}
	if !changed {
		return value
	}
	return strings.Join(words, " ")
}

func (c *Cartridge) mcpList(k *checker, m map[string]any, path, key string, env Lookup, s *MCPServer) []string {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	list, isList := v.([]any)
	if !isList {
		k.fail(join(path, key), "must be a list of arguments, not %s", kind(v))
		return nil
	}
	out := make([]string, 0, len(list))
	for i, x := range list {
		p := fmt.Sprintf("%s.%s[%d]", path, key, i)
		if !c.mcpScalar(k, x, p) {
			return nil
		}
		out = append(out, c.resolveWords(s, p, text(x), env))
	}
	return out
}

// mcpScalar reports whether x, at p, can be text: a scalar, or the null
// of a missing ENV reference (reported where it is missing); anything
// else fails k.
func (c *Cartridge) mcpScalar(k *checker, x any, p string) bool {
	switch x.(type) {
	case map[string]any, []any:
		k.fail(p, "must be text, not %s", kind(x))
		return false
	case nil:
		if !c.missing(p) {
			k.fail(p, "must be text, not null")
			return false
		}
	}
	return true
}

func (c *Cartridge) mcpMap(k *checker, m map[string]any, path, key string, env Lookup, s *MCPServer) map[string]string {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	mm, isMap := v.(map[string]any)
	if !isMap {
		k.fail(join(path, key), "must be a mapping of names to values, not %s", kind(v))
		return nil
	}
	out := make(map[string]string, len(mm))
	for _, name := range sortedKeys(mm) {
		x := mm[name]
		p := join(join(path, key), name)
		if !c.mcpScalar(k, x, p) {
			return nil
		}
		out[name] = c.resolveWords(s, p, text(x), env)
	}
	return out
}

// mcpDisplay is the command line with ENV references by name, so that
// a report about the server never shows a secret.
func (c *Cartridge) mcpDisplay(path string, s MCPServer) string {
	refs := map[string]string{}
	for _, r := range c.EnvRefs {
		refs[r.Path] = "ENV/" + r.Var
	}
	word := func(p, v string) string {
		if ref, ok := refs[p]; ok {
			v = ref
		} else if raw := c.rawAt(p); raw != "" {
			v = raw // words that were references keep their names
		}
		if v == "" || strings.ContainsAny(v, " \t\n'\"\\$`") {
			return strconv.Quote(v)
		}
		return v
	}
	parts := []string{word(path+".command", s.Command)}
	for i, a := range s.Args {
		parts = append(parts, word(fmt.Sprintf("%s.args[%d]", path, i), a))
	}
	return strings.Join(parts, " ")
}

// rawAt returns the text at a dotted path ("mcp.x.args[2]") before ENV
// substitution, or "".
func (c *Cartridge) rawAt(path string) string {
	var cur any = c.Raw
	for _, part := range strings.Split(path, ".") {
		key, idx := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 && strings.HasSuffix(part, "]") {
			n, err := strconv.Atoi(part[i+1 : len(part)-1])
			if err != nil {
				return ""
			}
			key, idx = part[:i], n
		}
		ms, ok := cur.(yaml.MapSlice)
		if !ok {
			return ""
		}
		found := false
		for _, item := range ms {
			if fmt.Sprint(item.Key) == key {
				cur, found = item.Value, true
				break
			}
		}
		if !found {
			return ""
		}
		if idx >= 0 {
			list, ok := cur.([]any)
			if !ok || idx >= len(list) {
				return ""
			}
			cur = list[idx]
		}
	}
	s, _ := cur.(string)
	return s
}
