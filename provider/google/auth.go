package google

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/jwt"

	"github.com/nbots/nb/provider"
)

// Scope is the OAuth scope Vertex AI tokens are requested for.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// DefaultTokenURL is Google's OAuth token endpoint, used when a key file
// names none.
const DefaultTokenURL = "https://oauth2.googleapis.com/token"

// credentialsFile is the part of a Google credentials JSON nb reads: a
// service-account key (type service_account) or the file
// `gcloud auth application-default login` writes (type authorized_user).
type credentialsFile struct {
	Type           string `json:"type"`
	ProjectID      string `json:"project_id"`
	PrivateKeyID   string `json:"private_key_id"`
	PrivateKey     string `json:"private_key"`
	ClientEmail    string `json:"client_email"`
	TokenURI       string `json:"token_uri"`
	ClientID       string `json:"client_id"`
	ClientSecret   string `json:"client_secret"`
	RefreshToken   string `json:"refresh_token"`
	QuotaProjectID string `json:"quota_project_id"`
}

// auth is how Vertex AI requests are authorised: a token source shared by
// every call of one client (so a token is fetched again only when it
// expires), the project it belongs to, and the key to name in errors.
type auth struct {
	source  oauth2.TokenSource
	project string
	// origin names the credential in messages: "provider.credentials.file-path", ...
	origin string
	// metadata is set when the token comes from the metadata server; the
	// project is then looked up lazily.
	metadata *metadataServer
	once     sync.Once
	err      error
}

// newAuth builds the token source from file-path, file-contents or, when
// neither is given, Application Default Credentials. A key file on the
// host and the host's Application Default Credentials are refused with a
// *provider.HostCredentialsError unless cfg.AllowHostCredentials is set.
func newAuth(cfg provider.Config, client *http.Client) (*auth, error) {
	// The token exchange goes through the configured client too, so
	// proxies, custom CAs and test servers apply to it.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, client)
	var (
		data   []byte
		origin string
	)
	switch {
	case cfg.Credential("file-path") != "":
		if !cfg.AllowHostCredentials {
			return nil, &provider.HostCredentialsError{Provider: ID, What: "provider.credentials.file-path (a key file on this host)",
				Hint: "give the key's JSON in provider.credentials.file-contents instead"}
		}
		path := cfg.Credential("file-path")
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: cannot read provider.credentials.file-path: %w", ID, err)
		}
		data, origin = b, "provider.credentials.file-path"
	case cfg.Credential("file-contents") != "":
		data, origin = []byte(cfg.Credential("file-contents")), "provider.credentials.file-contents"
	default:
		if !cfg.AllowHostCredentials {
			return nil, &provider.HostCredentialsError{Provider: ID, What: "application default credentials (used when provider.credentials has no api-key, file-path or file-contents)",
				Hint: "give a service-account key's JSON in provider.credentials.file-contents, or an api-key"}
		}
		path, err := findDefaultCredentials(cfg.Env)
		if err != nil {
			return nil, err
		}
		if path == "" {
			m := newMetadataServer(cfg.Env("GCE_METADATA_HOST"))
			return &auth{source: oauth2.ReuseTokenSource(nil, m), metadata: m,
				origin: "application default credentials (the metadata server)"}, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: application default credentials: %w", ID, err)
		}
		data, origin = b, "application default credentials ("+path+")"
	}
	var f credentialsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %s is not a Google credentials JSON file: %v", ID, origin, err)
	}
	a := &auth{project: f.ProjectID, origin: origin}
	switch f.Type {
	case "service_account":
		if f.ClientEmail == "" || f.PrivateKey == "" {
			return nil, fmt.Errorf("%s: %s: a service-account key needs client_email and private_key", ID, origin)
		}
		jc := &jwt.Config{
			Email:        f.ClientEmail,
			PrivateKey:   []byte(f.PrivateKey),
			PrivateKeyID: f.PrivateKeyID,
			Scopes:       []string{Scope},
			TokenURL:     f.TokenURI,
		}
		if jc.TokenURL == "" {
			jc.TokenURL = DefaultTokenURL
		}
		a.source = jc.TokenSource(ctx)
	case "authorized_user":
		if f.RefreshToken == "" {
			return nil, fmt.Errorf("%s: %s: an authorized_user file needs refresh_token", ID, origin)
		}
		tokenURL := f.TokenURI
		if tokenURL == "" {
			tokenURL = DefaultTokenURL
		}
		oc := &oauth2.Config{ClientID: f.ClientID, ClientSecret: f.ClientSecret, Scopes: []string{Scope},
			Endpoint: oauth2.Endpoint{TokenURL: tokenURL, AuthStyle: oauth2.AuthStyleInParams}}
		a.source = oc.TokenSource(ctx, &oauth2.Token{RefreshToken: f.RefreshToken})
		if a.project == "" {
			a.project = f.QuotaProjectID
		}
	case "":
		return nil, fmt.Errorf("%s: %s has no \"type\"; expected a service-account key (type service_account)", ID, origin)
	default:
		return nil, fmt.Errorf("%s: %s: credentials of type %q are not supported; use a service-account key (type service_account) or `gcloud auth application-default login`", ID, origin, f.Type)
	}
	return a, nil
}

// findDefaultCredentials returns the Application Default Credentials file,
// with the environment getenv gives: GOOGLE_APPLICATION_CREDENTIALS, else
// gcloud's well-known file (under CLOUDSDK_CONFIG, %APPDATA%\gcloud or
// $HOME/.config/gcloud) when it exists, else "" (the metadata server is
// tried).
func findDefaultCredentials(getenv func(string) string) (string, error) {
	if p := getenv("GOOGLE_APPLICATION_CREDENTIALS"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s: GOOGLE_APPLICATION_CREDENTIALS: %w", ID, err)
		}
		return p, nil
	}
	dir := getenv("CLOUDSDK_CONFIG")
	if dir == "" {
		if runtime.GOOS == "windows" {
			if appData := getenv("APPDATA"); appData != "" {
				dir = filepath.Join(appData, "gcloud")
			}
		} else if home := getenv("HOME"); home != "" {
			dir = filepath.Join(home, ".config", "gcloud")
		}
	}
	if dir != "" {
		p := filepath.Join(dir, "application_default_credentials.json")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", nil
}

// token returns a valid access token, fetching one only when the cached
// token has expired.
func (a *auth) token(ctx context.Context) (*oauth2.Token, error) {
	tok, err := a.source.Token()
	if err != nil {
		return nil, a.tokenError(ctx, err)
	}
	return tok, nil
}

// projectID returns the project: the credentials' own, or the metadata
// server's.
func (a *auth) projectID(ctx context.Context) (string, error) {
	if a.project != "" || a.metadata == nil {
		return a.project, nil
	}
	a.once.Do(func() { a.project, a.err = a.metadata.projectID(ctx) })
	return a.project, a.err
}

// tokenError turns a failed token exchange into a provider error that
// names the token endpoint's own message and the credential to check.
func (a *auth) tokenError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e := &provider.Error{Provider: ID, Hint: "check " + a.origin, Err: err}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode == "" {
			// The JWT flow leaves the RFC 6749 fields in the body.
			var oe struct {
				Code        string `json:"error"`
				Description string `json:"error_description"`
			}
			if json.Unmarshal(re.Body, &oe) == nil {
				re.ErrorCode, re.ErrorDescription = oe.Code, oe.Description
			}
		}
		msg := re.ErrorDescription
		if re.ErrorCode != "" {
			if msg != "" {
				msg = re.ErrorCode + ": " + msg
			} else {
				msg = re.ErrorCode
			}
		}
		if msg == "" {
			msg, _ = provider.ParseErrorBody(re.Body)
		}
		if msg == "" {
			msg = strings.TrimSpace(string(re.Body))
		}
		where := ""
		if re.Response != nil {
			e.Status = re.Response.StatusCode
			e.Retryable = e.Status == http.StatusTooManyRequests || e.Status >= 500
			if re.Response.Request != nil {
				where = " from " + re.Response.Request.URL.Redacted()
			}
		}
		e.Message = "cannot get an access token" + where + ": " + msg
		return e
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		e.Retryable = true
	}
	e.Message = "cannot get an access token: " + err.Error()
	return e
}

// metadataServer fetches tokens from the Compute Engine metadata server
// (Cloud Run, GKE, Compute Engine), the last step of Application Default
// Credentials. GCE_METADATA_HOST overrides its address.
type metadataServer struct {
	host   string
	client *http.Client
}

// newMetadataServer returns the metadata server at host (the value of
// GCE_METADATA_HOST), or at its link-local address when host is "".
func newMetadataServer(host string) *metadataServer {
	if host == "" {
		host = "169.254.169.254"
	}
	// The metadata server is link-local: never through a proxy.
	return &metadataServer{host: host, client: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 3 * time.Second}).DialContext},
	}}
}

func (m *metadataServer) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.host+"/computeMetadata/v1/"+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no application default credentials: GOOGLE_APPLICATION_CREDENTIALS is not set, there is no gcloud application_default_credentials.json, and the metadata server is unreachable (%v); set provider.credentials.file-path or file-contents", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metadata server %s: HTTP %d: %s", path, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return data, nil
}

// Token implements oauth2.TokenSource.
func (m *metadataServer) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data, err := m.get(ctx, "instance/service-accounts/default/token?scopes="+url.QueryEscape(Scope))
	if err != nil {
		return nil, err
	}
	var t struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal(data, &t); err != nil || t.AccessToken == "" {
		return nil, fmt.Errorf("metadata server: unreadable token response %q", provider.Clip(string(data)))
	}
	tok := &oauth2.Token{AccessToken: t.AccessToken, TokenType: t.TokenType}
	if t.ExpiresIn > 0 {
		tok.Expiry = time.Now().Add(time.Duration(t.ExpiresIn) * time.Second)
	}
	return tok, nil
}

func (m *metadataServer) projectID(ctx context.Context) (string, error) {
	data, err := m.get(ctx, "project/project-id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}
