package provider

import (
	"errors"
	"testing"
)

func TestEndpoint(t *testing.T) {
	const official = "https://api.example.com"
	tests := []struct {
		name        string
		creds       map[string]any
		wantAddress string
		wantCred    string
		wantMissing string
	}{
		{"official address needs the key", map[string]any{}, "", "", "access-token"},
		{"official address with the key", map[string]any{"access-token": "k"}, official, "k", ""},
		{"second key name counts", map[string]any{"api-key": "k2"}, official, "k2", ""},
		{"own address needs no key", map[string]any{"address": "http://localhost:8080"}, "http://localhost:8080", "", ""},
		{"own address keeps the key", map[string]any{"address": "http://h", "access-token": "k"}, "http://h", "k", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Credentials: tt.creds}
			address, cred, err := cfg.Endpoint("acme", official, "access-token", "api-key")
			if tt.wantMissing != "" {
				var missing *MissingCredentialError
				if !errors.As(err, &missing) || missing.Provider != "acme" || missing.Key != tt.wantMissing {
					t.Fatalf("err = %v, want a missing %s of acme", err, tt.wantMissing)
				}
				return
			}
			if err != nil || address != tt.wantAddress || cred != tt.wantCred {
				t.Fatalf("Endpoint = %q, %q, %v; want %q, %q", address, cred, err, tt.wantAddress, tt.wantCred)
			}
		})
	}
}
