package gatewayrun

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/nbots/nb/gateway/web"
	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/chatgate"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/pipeline/handler"
	"github.com/nbots/nb/provider/openai/openaitest"
)

// TestPipelineGateWebChat: the specification's Review flow, its gate
// asked with human.channel="web:review", is answered in a running
// gateway's web chat (over its websocket, as the page does): the
// question reaches the page open on the chat; a remark naming no choice
// is not taken (and does not reach the assistant); F, then Approve, take
// the run through fixes and ship_it; a page opened while the gate waits
// is shown the question; once the run ended, the chat talks to the
// assistant again.
func TestPipelineGateWebChat(t *testing.T) {
	model := httptest.NewServer(openaitest.New(echo))
	defer model.Close()
	c := testConfig(t, model.URL, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t)
	o.Listeners = []net.Listener{ln}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	gw, err := Open(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- gw.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()

	base := "http://" + ln.Addr().String()
	dial := func() *websocket.Conn {
		ws, _, err := websocket.Dial(ctx, "ws://"+ln.Addr().String()+"/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {base}}})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	// next is the next message frame of chat "review".
	next := func(ws *websocket.Conn) string {
		t.Helper()
		for {
			var f web.Frame
			if err := wsjson.Read(ctx, ws, &f); err != nil {
				t.Fatal(err)
			}
			if f.Type == "message" && f.ChatID == "review" {
				return f.Content
			}
		}
	}
	say := func(ws *websocket.Conn, text string) {
		if err := wsjson.Write(ctx, ws, web.Frame{Type: "message", ChatID: "review", Content: text}); err != nil {
			t.Fatal(err)
		}
	}
	page := dial()
	defer page.CloseNow()
	wsjson.Write(ctx, page, web.Frame{Type: "subscribe", ChatID: "review"})

	src := []byte(`digraph Review {
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	review_gate [shape=hexagon, label="Review Changes", human.channel="web:review"]
	start -> review_gate
	review_gate -> ship_it [label="[A] Approve"]
	review_gate -> fixes   [label="[F] Fix"]
	ship_it -> exit
	fixes -> review_gate
}`)
	gr, diags, err := pipeline.Load("review.dot", src)
	if err != nil || pipeline.HasErrors(diags) {
		t.Fatal(err, diags)
	}
	gate := chatgate.New(c.Channels, nil, gw.channelEnv("web", nil, ""), nil)
	gate.WebDir = gw.State.WebGates
	defer gate.Close()
	done := make(chan *engine.Result, 1)
	go func() {
		res, err := engine.Run(ctx, engine.Config{Graph: gr, Source: src, File: "review.dot", LogsRoot: t.TempDir(),
			Handlers: handler.NewRegistry(handler.Options{Interviewer: gate})})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()

	if q := next(page); !strings.Contains(q, "Review Changes") || !strings.Contains(q, "[F] Fix") {
		t.Fatalf("question %q", q)
	}
	say(page, "hello")
	if m := next(page); !strings.Contains(m, "Answer with one of A or F") {
		t.Fatalf("after a remark: %q", m)
	}
	say(page, "F")
	if m := next(page); m != "Taken: [F] Fix." {
		t.Fatalf("after F: %q", m)
	}
	if q := next(page); !strings.Contains(q, "Review Changes") {
		t.Fatalf("second question %q", q)
	}
	// A page opened now is shown the question waiting.
	late := dial()
	defer late.CloseNow()
	wsjson.Write(ctx, late, web.Frame{Type: "subscribe", ChatID: "review"})
	if q := next(late); !strings.Contains(q, "Review Changes") {
		t.Fatalf("late page: %q", q)
	}
	say(late, "Approve")
	res := <-done
	if res == nil || res.Status != engine.Success {
		t.Fatalf("result %+v", res)
	}
	want := []string{"start", "review_gate", "fixes", "review_gate", "ship_it", "exit"}
	if !slices.Equal(res.CompletedNodes, want) {
		t.Errorf("completed %v, want %v", res.CompletedNodes, want)
	}
	if m := next(late); m != "Taken: [A] Approve." {
		t.Fatalf("after Approve: %q", m)
	}
	// No gate waits: the chat is the assistant's again, and it never
	// saw the answers.
	say(late, "hi")
	if m := next(late); m != "echo: hi" {
		t.Fatalf("assistant: %q", m)
	}
	sess, err := gw.Sessions.Get(ctx, "web:review")
	if err != nil {
		t.Fatal(err)
	}
	if sess.Len() != 2 {
		t.Errorf("the assistant's session has %d entries, want 2 (hi and its answer)", sess.Len())
	}
}
