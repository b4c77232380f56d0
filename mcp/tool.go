package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/tool"
	"github.com/nbots/nb/tracing"
)

// Tool is one tool of an MCP server, offered to the model as
// <server>__<tool>.
type Tool struct {
	server *server
	remote string
	spec   tool.Spec
}

// Spec describes the tool; its parameters went through Schema.
func (t *Tool) Spec() tool.Spec { return t.spec }

// Server is the name of the tool's server; Remote the tool's name there.
func (t *Tool) Server() string { return t.server.cfg.Name }

// Remote is the tool's name as its server spells it.
func (t *Tool) Remote() string { return t.remote }

// errTimeout is the cause of a call's context when its time is up.
var errTimeout = errors.New("timeout")

// Run calls the tool. Its result is a *tool.Result (text, images, and
// IsError when the server reports a failure); an error says why the
// call could not be made or answered (timeout, a server that exited).
// The call may take the server's timeout, counted again from each
// progress notification the server sends.
func (t *Tool) Run(ctx context.Context, call tool.Call) (_ any, err error) {
	s := t.server
	ctx, span := tracing.StartMCP(ctx, "tools/call", t.remote, s.cfg.Name)
	defer func() { tracing.End(span, err) }()
	start, outcome := time.Now(), "error"
	defer func() { metric.MCPCall(s.cfg.Name, t.remote, outcome, start) }()
	sess, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()

	timeout := s.cfg.Timeout
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(timeout, func() { cancel(errTimeout) })
	defer timer.Stop()
	token := "nb-" + strconv.FormatUint(s.token.Add(1), 10)
	s.progress.Store(token, func() { timer.Reset(timeout) })
	defer s.progress.Delete(token)

	args := call.Arguments
	if args == nil {
		args = map[string]any{}
	}
	params := &mcpsdk.CallToolParams{Name: t.remote, Arguments: args}
	params.SetProgressToken(token)
	if tp := tracing.TraceParent(ctx); tp != "" {
		// MCP's convention for trace context, whatever the transport.
		params.Meta["traceparent"] = tp
	}
	res, err := sess.CallTool(ctx, params)
	if err != nil {
		switch {
		case errors.Is(context.Cause(ctx), errTimeout):
			outcome = "timeout"
			return nil, fmt.Errorf("MCP server %q: %s did not answer within %s (the server's timeout key sets this limit)", s.cfg.Name, t.remote, timeout)
		case ctx.Err() != nil:
			outcome = "canceled"
			return nil, ctx.Err()
		}
		var rpc *sdk.Error
		if errors.As(err, &rpc) {
			outcome = "refused"
			return nil, fmt.Errorf("MCP server %q refused the call to %s: %s", s.cfg.Name, t.remote, rpc.Message)
		}
		lost := errors.Is(err, mcpsdk.ErrConnectionClosed) || errors.Is(err, io.EOF)
		if !lost && p != nil {
			lost = p.exitStatus(100*time.Millisecond) != ""
		}
		if lost {
			outcome = "lost"
			why := s.ended(p)
			if s.detach(sess) {
				go s.recover(p)
			}
			return nil, fmt.Errorf("MCP server %q failed during the call to %s: %s", s.cfg.Name, t.remote, why)
		}
		return nil, fmt.Errorf("MCP server %q: calling %s: %v", s.cfg.Name, t.remote, err)
	}
	outcome = "ok"
	if res.IsError {
		outcome = "tool_error"
	}
	return Result(res), nil
}

// Result turns an MCP tool result into a tool.Result: text blocks joined
// by newlines, images as media.Image (the provider sends them where the
// model takes images), audio, resources and resource links described in
// text (a text resource's content is included), structured content as
// JSON when there is nothing else, and isError as IsError.
func Result(res *mcpsdk.CallToolResult) *tool.Result {
	out := &tool.Result{IsError: res.IsError}
	var parts []string
	for _, c := range res.Content {
		switch b := c.(type) {
		case *mcpsdk.TextContent:
			parts = append(parts, b.Text)
		case *mcpsdk.ImageContent:
			out.Images = append(out.Images, media.Image{MediaType: b.MIMEType, Data: b.Data})
		case *mcpsdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes, not shown]", b.MIMEType, len(b.Data)))
		case *mcpsdk.ResourceLink:
			parts = append(parts, describeLink(b))
		case *mcpsdk.EmbeddedResource:
			if b.Resource == nil {
				continue
			}
			r := b.Resource
			switch {
			case r.Blob != nil && strings.HasPrefix(r.MIMEType, "image/"):
				out.Images = append(out.Images, media.Image{MediaType: r.MIMEType, Data: r.Blob})
				parts = append(parts, fmt.Sprintf("[resource %s: image below]", r.URI))
			case r.Blob != nil:
				parts = append(parts, fmt.Sprintf("[resource %s: %s, %d bytes of binary content, not shown]", r.URI, orUnknown(r.MIMEType), len(r.Blob)))
			default:
				parts = append(parts, fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text))
			}
		default:
			if b, err := json.Marshal(c); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	out.Text = strings.Join(parts, "\n")
	if out.Text == "" && len(out.Images) == 0 {
		out.Text = "(no output)"
	}
	return out
}

func describeLink(l *mcpsdk.ResourceLink) string {
	var b strings.Builder
	b.WriteString("[resource link: ")
	b.WriteString(l.URI)
	name := l.Title
	if name == "" {
		name = l.Name
	}
	if name != "" {
		b.WriteString(" (" + name + ")")
	}
	if l.MIMEType != "" {
		b.WriteString(", " + l.MIMEType)
	}
	if l.Description != "" {
		b.WriteString(": " + l.Description)
	}
	b.WriteString("]")
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}
