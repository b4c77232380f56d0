package proc

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestEnvAllowList(t *testing.T) {
	parent := []string{
		"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm",
		"TOKEN=t", "PASSWORD=p", "PGPASSWORD=p", "APIKEY=k", "DATABASE_URL=postgres://u:p@h/d",
		"GH_PAT=x", "PASSPHRASE=x", "OPENAI_API_KEY_2=x", "NANO_BOTS_ENCRYPTION_PASSWORD=x",
		"WANTED=yes", "=weird", "noequals",
	}
	got := Env(parent, []string{"WANTED", "ABSENT"}, "EXTRA=1", "HOME=/override")
	want := []string{"PATH=/usr/bin", "HOME=/override", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "WANTED=yes", "EXTRA=1"}
	if !slices.Equal(got, want) {
		t.Errorf("Env = %q\nwant %q", got, want)
	}
}

func TestLookup(t *testing.T) {
	env := []string{"A=1", "B=2", "A=3"}
	if v, ok := Lookup(env, "A"); !ok || v != "3" {
		t.Errorf("Lookup(A) = %q, %v", v, ok)
	}
	if _, ok := Lookup(env, "C"); ok {
		t.Error("Lookup(C) found a value")
	}
}

// TestCommandEnvEmpty: a command's environment is empty unless set.
func TestCommandEnvEmpty(t *testing.T) {
	t.Setenv("NB_PROC_SECRET", "s3cret")
	cmd := Command(context.Background(), "/usr/bin/env")
	out, err := cmd.Output()
	Reap(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cret") {
		t.Errorf("the child saw nb's environment:\n%s", out)
	}
}
