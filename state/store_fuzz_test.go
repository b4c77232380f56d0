package state

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecode: no state file, plain or encrypted, makes decode panic; a
// refused file is named; a decoded document has a history and survives
// being written and read again; an encrypted file decodes as its plain
// text does.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"key":"k","history":[{"at":"2024-01-01T00:00:00Z","who":"user","mode":"eval","input":"hi","message":"hi"},{"at":"2024-01-01T00:00:01Z","who":"AI","message":"hello","meta":{"tool_calls":[{"id":"c","name":"f","arguments":"{}"}]}}]}`))
	f.Add([]byte(`{"key":"k","history":null}`))
	f.Add([]byte("  \n"))
	f.Add([]byte(`{"key":"k","history":[{"who":"tool","message":{"any":["json",1,true,null]}}]}`))
	f.Add([]byte("not json and not base64!"))
	f.Add([]byte(`{"history":[{"message":1e999}]}`))
	plain := &fileConversation{dir: "/state/k", key: "k"}
	secret := &fileConversation{dir: "/state/k", key: "k", cipher: NewCipher("password")}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := plain.decode(data)
		check(t, doc, err)
		docE, errE := secret.decode(data)
		check(t, docE, errE)
		if err != nil {
			return
		}
		// Written and read again, the document is the same.
		out, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("a decoded document does not encode: %v", err)
		}
		again, err := plain.decode(out)
		if err != nil {
			t.Fatalf("an encoded document does not decode: %v", err)
		}
		out2, _ := json.Marshal(again)
		if !bytes.Equal(out, out2) {
			t.Fatalf("round trip:\n%s\n%s", out, out2)
		}
		// Read as typed events and written back unchanged, the
		// records are the same bytes.
		typed, err := json.Marshal(&Document{Key: doc.Key, History: JSON(FromJSON(doc.History))})
		if err != nil {
			t.Fatalf("typed events do not encode: %v", err)
		}
		if !bytes.Equal(out, typed) {
			t.Fatalf("typed round trip:\n%s\n%s", out, typed)
		}
		// Encrypted, it decodes the same.
		if text := bytes.TrimSpace(data); len(text) > 0 {
			sealed, err := secret.cipher.Encrypt(text)
			if err != nil {
				t.Fatal(err)
			}
			docS, err := secret.decode([]byte(sealed))
			if err != nil {
				t.Fatalf("encrypted: %v", err)
			}
			outS, _ := json.Marshal(docS)
			if !bytes.Equal(out, outS) {
				t.Fatalf("encrypted:\n%s\n%s", out, outS)
			}
		}
	})
}

func check(t *testing.T, doc *Document, err error) {
	t.Helper()
	if err != nil {
		if doc != nil || !strings.Contains(err.Error(), "/state/k") {
			t.Fatalf("document %v, error %v", doc, err)
		}
		return
	}
	if doc == nil || doc.History == nil {
		t.Fatalf("document %+v", doc)
	}
}
