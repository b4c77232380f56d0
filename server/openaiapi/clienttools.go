package openaiapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/tool"
)

// MaxClientTools bounds the function tools one request may send. OpenAI
// takes 128; nb takes more for the clients that offer many, but not so
// many that a request's tools cost more than its run.
const MaxClientTools = 512

// toolChecker checks the client's tools of one request in linear time:
// each name is looked up in a map of the names before it, as
// tool.MatchName compares them.
type toolChecker struct {
	bot   *bot.Bot
	seen  map[string]bool
	specs []tool.Spec
}

// toolList is a request's tools: more than MaxClientTools are refused
// before any is decoded (tens of thousands of parameter schemas would
// cost more than the request's whole run).
type toolList[T any] []T

func (l *toolList[T]) UnmarshalJSON(data []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return badRequest("tools", "tools must be an array of tool objects")
	}
	if err := checkToolCount(len(raw)); err != nil {
		return err
	}
	if raw == nil {
		*l = nil
		return nil
	}
	out := make([]T, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			param := fmt.Sprintf("tools[%d]", i)
			var te *json.UnmarshalTypeError
			if asTypeError(err, &te) && te.Field != "" {
				param += "." + te.Field
				return badRequest(param, "invalid value for %s: expected %s, got JSON %s", param, jsonKind(te.Type), te.Value)
			}
			return badRequest(param, "a tool must be an object")
		}
	}
	*l = out
	return nil
}

// checkToolCount refuses more than MaxClientTools tools, with OpenAI's
// own error for an array that is too long.
func checkToolCount(n int) error {
	if n > MaxClientTools {
		e := badRequest("tools", "Invalid 'tools': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", MaxClientTools, n)
		e.Code = "array_above_max_length"
		return e
	}
	return nil
}

// newToolChecker checks n tools.
func newToolChecker(b *bot.Bot, n int) (*toolChecker, error) {
	if err := checkToolCount(n); err != nil {
		return nil, err
	}
	return &toolChecker{bot: b, seen: make(map[string]bool, n), specs: make([]tool.Spec, 0, n)}, nil
}

// add checks one of the client's tools: a name every provider takes,
// that no cartridge tool and no earlier client tool has. It stops when
// the client has gone.
func (c *toolChecker) add(ctx context.Context, param, name, description string, parameters map[string]any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if name == "" {
		return badRequest(param, "a function tool needs a name")
	}
	if tool.ProviderName(name) != name {
		return badRequest(param, "invalid function name %q: use letters, digits, '_' and '-' (at most 64, not starting with a digit or '-')", name)
	}
	if _, ok := c.bot.Tools().Lookup(name); ok {
		return badRequest(param, "the function name %q is taken by a tool of cartridge %s: rename the client's function", name, c.bot.Cartridge.Meta().Name)
	}
	key := tool.MatchName(name)
	if c.seen[key] {
		return badRequest(param, "two functions are named %q", name)
	}
	c.seen[key] = true
	if parameters == nil {
		parameters = tool.DefaultParameters()
	}
	c.specs = append(c.specs, tool.Spec{Name: name, Description: description, Parameters: parameters})
	return nil
}

type admittedKey struct{}

// admitRequest starts the run of a request before its body is decoded and
// checked: that work counts against the client's limits like the
// exchange it prepares (a client over them is refused before its body is
// looked at), and it stops when the client goes away. The run ends with
// done; run does not admit the request's exchange again.
func (h *Handler) admitRequest(r *http.Request) (*http.Request, func(), error) {
	if h.admit == nil {
		return r, func() {}, nil
	}
	ctx, done, err := h.admit(r.Context(), false)
	if err != nil {
		return r, nil, err
	}
	return r.WithContext(context.WithValue(ctx, admittedKey{}, true)), done, nil
}

// admitted reports whether ctx is the run of an admitted request.
func admitted(ctx context.Context) bool {
	ok, _ := ctx.Value(admittedKey{}).(bool)
	return ok
}
