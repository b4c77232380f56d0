package provider

import (
	"fmt"
	"strings"
)

// MissingCredentialError says a credential the provider needs is empty.
// The command line adds which environment variable should have filled it.
type MissingCredentialError struct {
	Provider string
	// Key is the credentials key, e.g. "access-token".
	Key string
}

func (e *MissingCredentialError) Error() string {
	return fmt.Sprintf("%s: provider.credentials.%s is not set", e.Provider, e.Key)
}

// Credential returns the credential stored under any of keys (the
// specification spells some with dashes, some with underscores), trimmed.
func (c Config) Credential(keys ...string) string {
	return lookupString(c.Credentials, keys...)
}

// Option returns the string option stored under any of keys.
func (c Config) Option(keys ...string) string {
	return lookupString(c.Options, keys...)
}

// OptionBool reads a boolean option as a cartridge writes it: true or
// false, as YAML booleans or as strings.
func OptionBool(v any) (bool, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "true", "yes", "on":
			return true, nil
		case "false", "no", "off":
			return false, nil
		}
	}
	return false, fmt.Errorf("want true or false, got %v", v)
}

func lookupString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		for _, variant := range []string{k, strings.ReplaceAll(k, "-", "_"), strings.ReplaceAll(k, "_", "-")} {
			if v, ok := m[variant]; ok && v != nil {
				if s := strings.TrimSpace(fmt.Sprint(v)); s != "" {
					return s
				}
			}
		}
	}
	return ""
}

// Require returns the credential under key, or a MissingCredentialError.
func (c Config) Require(key string) (string, error) {
	if v := c.Credential(key); v != "" {
		return v, nil
	}
	return "", &MissingCredentialError{Provider: c.ID, Key: key}
}

// Body starts a request body from the cartridge's settings: a deep copy in
// which null values are left out (a null setting means "not set"), so
// settings reach the API verbatim and a new API parameter needs no release.
func (c Config) Body() map[string]any {
	return dropNulls(c.Settings)
}

// BodyFor starts the body of req: Body with the settings of the
// request's Override merged in (a mapping into a mapping key by key,
// anything else replacing; a null removing the key). The provider then
// writes the Override's sampling view under its own names (see
// Override.Apply).
func (c Config) BodyFor(req Request) map[string]any {
	body := c.Body()
	if req.Override != nil {
		merge(body, req.Override.Settings)
	}
	return body
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = deepCopy(v)
	}
}

func dropNulls(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if v == nil {
			continue
		}
		out[k] = deepCopy(v)
	}
	return out
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return dropNulls(t)
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopy(x)
		}
		return out
	default:
		return v
	}
}

// JoinURL joins an address and an API path, tolerating a trailing slash
// and an address that already ends with the path's first segment
// (http://host/v1 + /v1/chat/completions).
func JoinURL(address, path string) string {
	address = strings.TrimRight(address, "/")
	if i := strings.Index(path[1:], "/"); i > 0 {
		address = strings.TrimSuffix(address, path[:i+1])
	}
	return address + path
}

// Endpoint returns the cartridge's credentials.address and the credential
// stored under the first of keys that is set. Without an address it
// returns official, provider id's own address, and then the credential is
// required: a self-hosted or compatible server behind an address may need
// none, the provider's own API always does. keys[0] names the credential
// in the error.
func (c Config) Endpoint(id, official string, keys ...string) (address, credential string, err error) {
	address = c.Credential("address")
	credential = c.Credential(keys...)
	if address == "" {
		if credential == "" {
			return "", "", &MissingCredentialError{Provider: id, Key: keys[0]}
		}
		address = official
	}
	return address, credential, nil
}

// Model is the model c names: settings.model, else options.model
// (Google's); "" when it names none.
func (c Config) Model() string {
	if m, _ := c.Settings["model"].(string); m != "" {
		return m
	}
	m, _ := c.Options["model"].(string)
	return m
}
