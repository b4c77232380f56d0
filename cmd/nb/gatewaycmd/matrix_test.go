package gatewaycmd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/matrix/matrixtest"
)

// TestGatewayMatrix runs nb gateway with a Matrix channel against the
// client-server API fake and a fake model: the bot joins the room an
// allowed user invites it to and answers there; in a room of several
// people it answers the allowed user's mention, not their chatter, and
// not a stranger's mention.
func TestGatewayMatrix(t *testing.T) {
	const token = "syt_secret_matrix_token"
	hs, err := matrixtest.New(token)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{"matrix": {"enabled": true, "homeserver": %q, "accessToken": %q, "userId": "@nb:fake.test", "allowFrom": ["@ann:fake.test"], "groupPolicy": "mention", "e2eeEnabled": true}}`, hs.URL, token))
	logs := runGateway(t, dir, cfg, "secret_matrix")
	wait, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()

	const ann, eve, joe = "@ann:fake.test", "@eve:fake.test", "@joe:fake.test"
	dm := hs.DirectRoom(ann)
	for !hs.Joined(dm) {
		if wait.Err() != nil {
			t.Fatalf("the bot did not join the allowed user's room\n%s", logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	hs.Say(dm, ann, "hello there")
	sent, err := hs.WaitSent(wait, dm, 1)
	if err != nil {
		t.Fatalf("no answer to the allowed user: %v\n%s", err, logs())
	}
	if body, _ := sent[0].Content["body"].(string); !strings.Contains(body, "echo: hello there") {
		t.Errorf("answer %q", body)
	}
	if !strings.Contains(logs(), "end-to-end encryption is not supported") {
		t.Errorf("no start-up word about encryption:\n%s", logs())
	}

	room := hs.CreateRoom(ann, matrixtest.RoomOptions{Members: []string{eve, joe}})
	hs.Invite(room, ann, hs.Bot)
	for !hs.Joined(room) {
		if wait.Err() != nil {
			t.Fatal("the bot did not join the group room")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mention := func(text string) map[string]any {
		return map[string]any{"msgtype": "m.text", "body": text, "m.mentions": map[string]any{"user_ids": []any{hs.Bot}}}
	}
	hs.Say(room, ann, "chatter among people")
	hs.Post(room, eve, "m.room.message", mention("nb, answer me"))
	hs.Post(room, ann, "m.room.message", mention("nb, what now"))
	sent, err = hs.WaitSent(wait, room, 1)
	if err != nil {
		t.Fatalf("no answer to the allowed user's mention: %v\n%s", err, logs())
	}
	time.Sleep(300 * time.Millisecond)
	sent = hs.Sent(room)
	if len(sent) != 1 {
		t.Fatalf("%d messages in the room, want only the answer to the mention: %v", len(sent), sent)
	}
	if body, _ := sent[0].Content["body"].(string); !strings.Contains(body, "echo: nb, what now") {
		t.Errorf("answer %q", body)
	}
}
