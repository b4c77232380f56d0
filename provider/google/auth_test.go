package google_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/google/googletest"
	"github.com/nbots/nb/provider/providertest"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// serviceAccount returns a service-account key JSON, as the Cloud console
// downloads it, whose token_uri is the fake's token endpoint.
func serviceAccount(t *testing.T, key *rsa.PrivateKey, tokenURI, project string) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sa := map[string]any{
		"type": "service_account", "project_id": project, "private_key_id": "key-id-1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "nb-test@" + project + ".iam.gserviceaccount.com", "client_id": "1234567890",
		"auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": tokenURI,
	}
	b, _ := json.Marshal(sa)
	return string(b)
}

func vertexSetup(t *testing.T, creds map[string]any) (provider.Provider, *googletest.Server, *rsa.PrivateKey, *httptest.Server) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	fake := googletest.New(providertest.Echo)
	fake.PublicKey = &key.PublicKey
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c := map[string]any{"service": "vertex-ai-api", "region": "us-central1", "address": srv.URL}
	for k, v := range creds {
		c[k] = v
	}
	if v, _ := c["file-contents"].(string); v == "" {
		c["file-contents"] = serviceAccount(t, key, srv.URL+"/token", "test-project")
	}
	p, err := provider.New(provider.Config{ID: "google", Credentials: c, Options: map[string]any{"model": model}, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p, fake, key, srv
}

func TestVertexServiceAccount(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	fake := googletest.New(providertest.Echo)
	fake.PublicKey = &key.PublicKey
	fake.TokenLifetime = 12 // the client renews 10 s early: valid for 2 s
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	path := writeFile(t, t.TempDir(), "sa.json", serviceAccount(t, key, srv.URL+"/token", "test-project"))
	p, err := provider.New(provider.Config{ID: "google",
		Credentials: map[string]any{"service": "vertex-ai-api", "region": "us-central1", "file-path": path, "address": srv.URL},
		Options:     map[string]any{"model": model}, HTTPClient: srv.Client(), AllowHostCredentials: true})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(q string) {
		t.Helper()
		resp, err := p.Complete(context.Background(), provider.Request{System: "sys", Messages: []provider.Message{user(q)}, Stream: true}, nil)
		if err != nil || resp.Text != "echo: "+q {
			t.Fatalf("%+v %v", resp, err)
		}
	}
	start := time.Now()
	ask("one")
	ask("two")
	if time.Since(start) > 1500*time.Millisecond {
		t.Skip("the machine is too slow to call twice within the token's life")
	}
	as := fake.Assertions()
	if len(as) != 1 {
		t.Fatalf("%d token exchanges for two calls within the token's life, want 1", len(as))
	}
	// The fake accepted the assertion only if the generated key signed it;
	// check its claims as Google's token endpoint reads them.
	a := as[0]
	if a.Header["alg"] != "RS256" || a.Header["kid"] != "key-id-1" {
		t.Errorf("JWT header %v", a.Header)
	}
	c := a.Claims
	iat, _ := c["iat"].(float64)
	exp, _ := c["exp"].(float64)
	if c["iss"] != "nb-test@test-project.iam.gserviceaccount.com" || c["scope"] != "https://www.googleapis.com/auth/cloud-platform" ||
		c["aud"] != srv.URL+"/token" || exp-iat != 3600 || time.Since(time.Unix(int64(iat), 0)) > time.Minute {
		t.Errorf("JWT claims %v", c)
	}
	reqs := fake.Requests()
	for _, r := range reqs {
		if r.Path != "/v1/projects/test-project/locations/us-central1/publishers/google/models/gemini-2.0-flash:streamGenerateContent" ||
			r.Query.Get("alt") != "sse" || r.Authorization != "Bearer ya29.fake-token-1" || r.APIKey != "" {
			t.Errorf("request %+v", r)
		}
	}
	// Vertex takes the same body: systemInstruction included.
	if _, ok := fake.Recorder.Last()["systemInstruction"]; !ok {
		t.Error("no systemInstruction on Vertex")
	}
	time.Sleep(time.Until(start.Add(2200 * time.Millisecond)))
	ask("three")
	if n := len(fake.Assertions()); n != 2 {
		t.Fatalf("%d token exchanges after expiry, want 2", n)
	}
	if r := fake.Requests()[2]; r.Authorization != "Bearer ya29.fake-token-2" {
		t.Errorf("after expiry: %+v", r)
	}
}

func TestVertexWrongKeyAndProject(t *testing.T) {
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p, fake, _, srv := vertexSetup(t, map[string]any{"file-contents": ""})
	// project-id overrides the key's project.
	p2, err := provider.New(provider.Config{ID: "google",
		Credentials: map[string]any{"service": "vertex-ai-api", "region": "europe-west4", "project-id": "other-project", "address": srv.URL,
			"file_contents": serviceAccount(t, other, srv.URL+"/token", "test-project")},
		Options: map[string]any{"model": model}, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, nil); err != nil {
		t.Fatal(err)
	}
	if r := fake.Requests()[0]; r.Path != "/v1/projects/test-project/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent" {
		t.Errorf("path %s", r.Path)
	}
	// A key the token endpoint does not know: its own error text, and
	// which credential to check.
	_, err = p2.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 400 || provider.IsRetryable(err) ||
		err.Error() != "google: HTTP 400 Bad Request: cannot get an access token from "+srv.URL+"/token: invalid_grant: Invalid JWT Signature. (check provider.credentials.file-contents)" {
		t.Fatalf("got %v", err)
	}
	if len(fake.Requests()) != 1 {
		t.Error("a model request was sent without a token")
	}
	// The model endpoint's 401/403 name the credential too.
	fake.Brain = providertest.Scripted(providertest.Reply{Status: 403})
	_, err = p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, nil)
	if err == nil || !strings.Contains(err.Error(), "Permission 'aiplatform.endpoints.predict' denied") || !strings.HasSuffix(err.Error(), "(check provider.credentials.file-contents)") {
		t.Errorf("got %v", err)
	}
	// A token the model endpoint does not accept (one another server
	// issued) is a 401 with Google's text and the credential to check.
	issuer, checker := googletest.New(providertest.Echo), googletest.New(providertest.Echo)
	issuer.PublicKey, checker.PublicKey = &other.PublicKey, &other.PublicKey
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			issuer.ServeHTTP(w, r)
			return
		}
		checker.ServeHTTP(w, r)
	}))
	t.Cleanup(srv2.Close)
	p3, err := provider.New(provider.Config{ID: "google",
		Credentials: map[string]any{"service": "vertex-ai-api", "region": "us-central1", "project-id": "p", "address": srv2.URL,
			"file-contents": serviceAccount(t, other, srv2.URL+"/token", "")},
		Options: map[string]any{"model": model}, HTTPClient: srv2.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p3.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}, Stream: true}, nil)
	if !errors.As(err, &pe) || pe.Status != 401 || pe.Code != "UNAUTHENTICATED" || !strings.Contains(err.Error(), "Request had invalid authentication credentials.") ||
		!strings.HasSuffix(err.Error(), "(check provider.credentials.file-contents)") || len(issuer.Assertions()) != 1 {
		t.Errorf("got %v", err)
	}
}

func TestApplicationDefaultCredentials(t *testing.T) {
	p0, fake, key, srv := vertexSetup(t, nil)
	_ = p0
	dir := t.TempDir()
	env := map[string]string{
		"CLOUDSDK_CONFIG":                dir,
		"GOOGLE_APPLICATION_CREDENTIALS": writeFile(t, dir, "adc.json", serviceAccount(t, key, srv.URL+"/token", "adc-project")),
	}
	getenv := func(k string) string { return env[k] }
	p, err := provider.New(provider.Config{ID: "google", Credentials: map[string]any{"service": "vertex-ai-api", "region": "us-central1", "address": srv.URL},
		Options: map[string]any{"model": model}, HTTPClient: srv.Client(), Getenv: getenv, AllowHostCredentials: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}, Stream: true}, nil); err != nil {
		t.Fatal(err)
	}
	if r := fake.Requests()[0]; !strings.HasPrefix(r.Path, "/v1/projects/adc-project/") || !strings.HasPrefix(r.Authorization, "Bearer ya29.fake-token-") {
		t.Errorf("request %+v", r)
	}

	// No file anywhere: the metadata server gives the token and project.
	delete(env, "GOOGLE_APPLICATION_CREDENTIALS")
	var flavour []string
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		flavour = append(flavour, r.Header.Get("Metadata-Flavor"))
		switch r.URL.Path {
		case "/computeMetadata/v1/instance/service-accounts/default/token":
			if r.URL.Query().Get("scopes") != "https://www.googleapis.com/auth/cloud-platform" {
				http.Error(w, "scopes", 400)
				return
			}
			w.Write([]byte(`{"access_token":"ya29.metadata","expires_in":3599,"token_type":"Bearer"}`))
		case "/computeMetadata/v1/project/project-id":
			w.Write([]byte("meta-project"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(meta.Close)
	env["GCE_METADATA_HOST"] = strings.TrimPrefix(meta.URL, "http://")
	fake.PublicKey = nil // accept any bearer
	p, err = provider.New(provider.Config{ID: "google", Credentials: map[string]any{"service": "vertex-ai-api", "region": "global", "address": srv.URL},
		Options: map[string]any{"model": model}, HTTPClient: srv.Client(), Getenv: getenv, AllowHostCredentials: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}, Stream: true}, nil); err != nil {
		t.Fatal(err)
	}
	reqs := fake.Requests()
	if r := reqs[len(reqs)-1]; r.Path != "/v1/projects/meta-project/locations/global/publishers/google/models/gemini-2.0-flash:streamGenerateContent" || r.Authorization != "Bearer ya29.metadata" {
		t.Errorf("request %+v", r)
	}
	if len(flavour) != 2 || flavour[0] != "Google" || flavour[1] != "Google" {
		t.Errorf("metadata requests %q", flavour)
	}
}

func TestVertexExpressAndAddress(t *testing.T) {
	fake := googletest.New(providertest.Echo)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		creds map[string]any
		opts  map[string]any
		path  string
	}{
		{map[string]any{"service": "vertex-ai-api", "api-key": "k", "address": srv.URL}, nil, "/v1/publishers/google/models/gemini-2.0-flash:generateContent"},
		{map[string]any{"service": "generative-language-api", "api-key": "k", "address": srv.URL + "/v1beta/"}, nil, "/v1beta/models/gemini-2.0-flash:generateContent"},
		{map[string]any{"service": "generative-language-api", "api-key": "k", "address": srv.URL}, map[string]any{"api-version": "v1", "model": "models/" + model}, "/v1/models/gemini-2.0-flash:generateContent"},
	} {
		opts := tc.opts
		if opts == nil {
			opts = map[string]any{"model": model}
		}
		p, err := provider.New(provider.Config{ID: "google", Credentials: tc.creds, Options: opts, HTTPClient: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, nil); err != nil {
			t.Fatal(err)
		}
		reqs := fake.Requests()
		if r := reqs[len(reqs)-1]; r.Path != tc.path || r.APIKey != "k" || r.Authorization != "" {
			t.Errorf("%v: %+v", tc.creds, r)
		}
	}
}

// Without AllowHostCredentials (a server running its clients' cartridges)
// neither a key file path nor the host's application default credentials
// may be used, even when the environment names them; the error says which
// setting refuses them. The key's contents and an API key still work.
func TestHostCredentialsRefused(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	fake := googletest.New(providertest.Echo)
	fake.PublicKey = &key.PublicKey
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	sa := serviceAccount(t, key, srv.URL+"/token", "p")
	path := writeFile(t, t.TempDir(), "sa.json", sa)
	getenv := func(k string) string {
		return map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": path}[k]
	}
	for name, creds := range map[string]map[string]any{
		"file-path": {"file-path": path},
		"ADC":       {},
	} {
		c := map[string]any{"service": "vertex-ai-api", "region": "us-central1", "address": srv.URL}
		for k, v := range creds {
			c[k] = v
		}
		_, err := provider.New(provider.Config{ID: "google", Credentials: c, Options: map[string]any{"model": model}, HTTPClient: srv.Client(), Getenv: getenv})
		var he *provider.HostCredentialsError
		if !errors.As(err, &he) || he.Provider != "google" || !strings.Contains(err.Error(), "allow-host-credentials is off") {
			t.Errorf("%s: got %v", name, err)
		}
	}
	for name, creds := range map[string]map[string]any{
		"file-contents": {"region": "us-central1", "file-contents": sa},
		"api-key":       {"api-key": "k"},
	} {
		c := map[string]any{"service": "vertex-ai-api", "address": srv.URL}
		for k, v := range creds {
			c[k] = v
		}
		p, err := provider.New(provider.Config{ID: "google", Credentials: c, Options: map[string]any{"model": model}, HTTPClient: srv.Client(), Getenv: getenv})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Application default credentials come from the environment Getenv gives,
// never from the process's: with a key file named in the process
// environment only, the metadata server (the last resort) is asked.
func TestADCIgnoresProcessEnvironment(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	fake := googletest.New(providertest.Echo)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", writeFile(t, t.TempDir(), "sa.json", serviceAccount(t, key, srv.URL+"/token", "process-env-project")))
	var asked atomic.Int32
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		switch r.URL.Path {
		case "/computeMetadata/v1/instance/service-accounts/default/token":
			w.Write([]byte(`{"access_token":"ya29.metadata","expires_in":3599,"token_type":"Bearer"}`))
		case "/computeMetadata/v1/project/project-id":
			w.Write([]byte("meta-project"))
		}
	}))
	t.Cleanup(meta.Close)
	env := map[string]string{"GCE_METADATA_HOST": strings.TrimPrefix(meta.URL, "http://"), "HOME": t.TempDir()}
	p, err := provider.New(provider.Config{ID: "google", Credentials: map[string]any{"service": "vertex-ai-api", "region": "us-central1", "address": srv.URL},
		Options: map[string]any{"model": model}, HTTPClient: srv.Client(), Getenv: func(k string) string { return env[k] }, AllowHostCredentials: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, nil); err != nil {
		t.Fatal(err)
	}
	if r := fake.Requests()[0]; !strings.Contains(r.Path, "/projects/meta-project/") || r.Authorization != "Bearer ya29.metadata" || asked.Load() != 2 {
		t.Errorf("request %+v, metadata asked %d times", r, asked.Load())
	}
}
