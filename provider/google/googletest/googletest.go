// Package googletest is an in-process fake of Google's Gemini APIs: the
// Generative Language API (/v1beta/models/<model>:generateContent and
// :streamGenerateContent, key in x-goog-api-key) and Vertex AI
// (/v1/projects/<p>/locations/<r>/publishers/google/models/<model>:...,
// Bearer token), plus an OAuth token endpoint (/token) that checks the
// service-account JWT assertion the way Google's does. Answers follow the
// documented wire format: GenerateContentResponse objects, streamed as
// server-sent events (alt=sse, CRLF frames, written in small pieces) or as
// a JSON array without alt=sse, and {"error":{code,message,status}} bodies.
// The Gemini API has no keep-alive or ping events, so the fake sends none.
package googletest

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider/providertest"
)

// Server is the fake's HTTP handler.
type Server struct {
	Brain    providertest.Brain
	Recorder *providertest.Recorder
	// SplitBytes is the size of the pieces streams are written in (default 7).
	SplitBytes int
	// APIKey, when set, is the only key the Generative Language API accepts.
	APIKey string
	// SendCallIDs gives each functionCall an id, as newer models do.
	SendCallIDs bool
	// Signatures attaches a thoughtSignature to the first functionCall part
	// and to the last text part of each answer, as thinking models do.
	Signatures bool
	// PublicKey, when set, makes Vertex paths require a Bearer token issued
	// by the token endpoint, which accepts only assertions signed by the
	// matching private key.
	PublicKey *rsa.PublicKey
	// TokenLifetime is the expires_in of issued tokens (default 3600 s).
	TokenLifetime int

	mu         sync.Mutex
	tokens     map[string]time.Time
	assertions []Assertion
	requests   []Request
}

// Assertion is a JWT assertion the token endpoint received and accepted.
type Assertion struct {
	Header map[string]any
	Claims map[string]any
}

// Request is what the model endpoints saw of a request, besides its body.
type Request struct {
	Path          string
	Query         url.Values
	APIKey        string
	Authorization string
}

// New returns a fake answering with brain.
func New(brain providertest.Brain) *Server {
	return &Server{Brain: brain, Recorder: &providertest.Recorder{}}
}

// ErrorBodies are error objects as Google sends them, by status.
var ErrorBodies = map[int]string{
	400: `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}},{"@type":"type.googleapis.com/google.rpc.LocalizedMessage","locale":"en-US","message":"API key not valid. Please pass a valid API key."}]}}`,
	401: `{"error":{"code":401,"message":"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.","status":"UNAUTHENTICATED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"ACCESS_TOKEN_TYPE_UNSUPPORTED","metadata":{"service":"aiplatform.googleapis.com","method":"google.cloud.aiplatform.v1.PredictionService.StreamGenerateContent"}}]}}`,
	403: `{"error":{"code":403,"message":"Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/projects/test-project/locations/us-central1/publishers/google/models/gemini-2.0-flash' (or it may not exist).","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"IAM_PERMISSION_DENIED","domain":"aiplatform.googleapis.com","metadata":{"permission":"aiplatform.endpoints.predict","resource":"projects/test-project/locations/us-central1/publishers/google/models/gemini-2.0-flash"}}]}}`,
	404: `{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.","status":"NOT_FOUND"}}`,
	429: `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"},"quotaValue":"15"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"33s"}]}}`,
	500: `{"error":{"code":500,"message":"An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting","status":"INTERNAL"}}`,
	503: `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`,
}

var (
	languagePath = regexp.MustCompile(`^/(v1|v1beta|v1alpha)/models/([^/:]+):(generateContent|streamGenerateContent)$`)
	vertexPath   = regexp.MustCompile(`^/(v1|v1beta1)/(?:projects/([^/]+)/locations/([^/]+)/)?publishers/google/models/([^/:]+):(generateContent|streamGenerateContent)$`)
)

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" && r.Method == http.MethodPost {
		s.token(w, r)
		return
	}
	var model, method string
	vertex := false
	if m := languagePath.FindStringSubmatch(r.URL.Path); m != nil {
		model, method = m[2], m[3]
	} else if m := vertexPath.FindStringSubmatch(r.URL.Path); m != nil {
		model, method, vertex = m[4], m[5], m[2] != ""
	}
	if model == "" || r.Method != http.MethodPost {
		writeError(w, 404, fmt.Sprintf(`{"error":{"code":404,"message":"The requested URL %s was not found on this server.","status":"NOT_FOUND"}}`, jsonEscape(r.URL.Path)), "")
		return
	}
	key := r.Header.Get("x-goog-api-key")
	if key == "" {
		key = r.URL.Query().Get("key")
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Path: r.URL.Path, Query: r.URL.Query(), APIKey: key, Authorization: r.Header.Get("Authorization")})
	s.mu.Unlock()
	if vertex && s.PublicKey != nil && !s.validBearer(r.Header.Get("Authorization")) {
		writeError(w, 401, ErrorBodies[401], "")
		return
	}
	if !vertex && s.APIKey != "" && key != s.APIKey {
		writeError(w, 400, ErrorBodies[400], "")
		return
	}
	body, _ := io.ReadAll(r.Body)
	if s.Recorder != nil {
		s.Recorder.Record(body)
	}
	turn, err := Decode(body)
	if err != nil {
		writeError(w, 400, fmt.Sprintf(`{"error":{"code":400,"message":"Invalid JSON payload received. %s","status":"INVALID_ARGUMENT"}}`, jsonEscape(err.Error())), "")
		return
	}
	turn.Model = model
	turn.Stream = method == "streamGenerateContent"
	reply := s.Brain(turn)
	// Errors and whole answers are JSON with a charset; streams set their own type.
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if providertest.WriteReplyError(w, reply, ErrorBodies) {
		return
	}
	switch {
	case !turn.Stream:
		io.WriteString(w, s.whole(model, reply)) //nolint:errcheck // client may have gone
	case r.URL.Query().Get("alt") == "sse":
		s.stream(w, model, reply, true)
	default:
		s.stream(w, model, reply, false)
	}
}

// writeError answers as Google's front ends do, with a charset in the
// Content-Type.
func writeError(w http.ResponseWriter, status int, body, retryAfter string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	providertest.WriteError(w, status, body, retryAfter)
}

func usage(prompt, candidates int) map[string]any {
	return map[string]any{"promptTokenCount": prompt, "candidatesTokenCount": candidates, "totalTokenCount": prompt + candidates}
}

func response(model string, parts []any, finish string, u map[string]any) string {
	cand := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	out := map[string]any{"candidates": []any{cand}, "usageMetadata": u, "modelVersion": model, "responseId": "fake-response-id"}
	b, _ := json.Marshal(out)
	return string(b)
}

func (s *Server) callParts(reply providertest.Reply) []any {
	var parts []any
	for i, c := range reply.Calls {
		var args any = map[string]any{}
		if c.Arguments != "" {
			json.Unmarshal([]byte(c.Arguments), &args) //nolint:errcheck // a test reply
		}
		fc := map[string]any{"name": c.Name, "args": args}
		if s.SendCallIDs {
			id := c.ID
			if id == "" {
				id = fmt.Sprintf("fake-call-%d", i)
			}
			fc["id"] = id
		}
		p := map[string]any{"functionCall": fc}
		if s.Signatures && i == 0 {
			p["thoughtSignature"] = "c2lnLWNhbGw=" // "sig-call"
		}
		parts = append(parts, p)
	}
	return parts
}

// stop is the finishReason of the reply: STOP unless it names another.
func stop(reply providertest.Reply) string {
	if reply.Finish != "" {
		return reply.Finish
	}
	return "STOP"
}

const textSignature = "c2lnLXRleHQ=" // "sig-text"

func (s *Server) stream(w http.ResponseWriter, model string, reply providertest.Reply, sse bool) {
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	}
	w.WriteHeader(200)
	n := providertest.SplitSize(s.SplitBytes)
	first := true
	send := func(obj string) {
		if sse {
			providertest.WriteSplit(w, "data: "+obj+"\r\n\r\n", n)
			return
		}
		sep := ",\r\n"
		if first {
			sep = "["
		}
		first = false
		providertest.WriteSplit(w, sep+obj, n)
	}
	end := func() {
		if !sse {
			if first {
				providertest.Flush(w, "[")
			}
			providertest.Flush(w, "]")
		}
	}
	produced := 0
	if reply.Reasoning != "" {
		for _, p := range providertest.Split(reply.Reasoning, 5) {
			send(response(model, []any{map[string]any{"text": p, "thought": true}}, "", usage(9, 0)))
		}
	}
	calls := s.callParts(reply)
	for i, c := range reply.Chunks {
		if reply.CutAfter > 0 && i >= reply.CutAfter {
			providertest.Hijack(w)
			return
		}
		if reply.Delay > 0 {
			time.Sleep(reply.Delay)
		}
		produced++
		p := map[string]any{"text": c}
		finish := ""
		last := i == len(reply.Chunks)-1
		if last && s.Signatures && len(calls) == 0 {
			p["thoughtSignature"] = textSignature
		}
		if last && len(calls) == 0 && reply.StreamError == "" {
			finish = stop(reply)
		}
		send(response(model, []any{p}, finish, usage(9, produced)))
	}
	if reply.StreamError != "" {
		send(fmt.Sprintf(`{"error":{"code":500,"message":%s,"status":"INTERNAL"}}`, providertest.JSONString(reply.StreamError)))
		end()
		return
	}
	if len(calls) > 0 {
		// Gemini sends each functionCall whole; parallel calls come as
		// several parts of one chunk.
		send(response(model, calls, stop(reply), usage(9, produced+len(calls))))
	} else if len(reply.Chunks) == 0 {
		send(response(model, []any{map[string]any{"text": ""}}, stop(reply), usage(9, 0)))
	}
	end()
}

func (s *Server) whole(model string, reply providertest.Reply) string {
	var parts []any
	if reply.Reasoning != "" {
		parts = append(parts, map[string]any{"text": reply.Reasoning, "thought": true})
	}
	calls := s.callParts(reply)
	if t := reply.Text(); t != "" {
		p := map[string]any{"text": t}
		if s.Signatures && len(calls) == 0 {
			p["thoughtSignature"] = textSignature
		}
		parts = append(parts, p)
	}
	parts = append(parts, calls...)
	return response(model, parts, stop(reply), usage(9, 12))
}

// Decode reads a generateContent request body into a Turn (the model and
// stream flag come from the URL, not the body). Each text part of a user
// content is one user message, each functionResponse part one tool
// message; a model content is one assistant message.
func Decode(body []byte) (providertest.Turn, error) {
	var req struct {
		SystemInstruction *struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"systemInstruction"`
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         *string `json:"text"`
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
				FunctionResponse *struct {
					ID       string         `json:"id"`
					Name     string         `json:"name"`
					Response map[string]any `json:"response"`
				} `json:"functionResponse"`
				InlineData *struct {
					MimeType string `json:"mimeType"`
					Data     string `json:"data"`
				} `json:"inlineData"`
				FileData *struct {
					MimeType string `json:"mimeType"`
					FileURI  string `json:"fileUri"`
				} `json:"fileData"`
			} `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		ToolConfig *struct {
			FunctionCallingConfig *struct {
				Mode                 string   `json:"mode"`
				AllowedFunctionNames []string `json:"allowedFunctionNames"`
			} `json:"functionCallingConfig"`
		} `json:"toolConfig"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return providertest.Turn{}, err
	}
	var t providertest.Turn
	if si := req.SystemInstruction; si != nil {
		var texts []string
		for _, p := range si.Parts {
			texts = append(texts, p.Text)
		}
		t.System = strings.Join(texts, "\n")
	}
	for ci, c := range req.Contents {
		if c.Role == "model" {
			msg := providertest.Msg{Role: "assistant"}
			for _, p := range c.Parts {
				if p.Text != nil {
					msg.Content += *p.Text
				}
				if fc := p.FunctionCall; fc != nil {
					args := string(fc.Args)
					if args == "" {
						args = "{}"
					}
					msg.ToolCalls = append(msg.ToolCalls, fc.Name+"("+args+")")
				}
			}
			t.Messages = append(t.Messages, msg)
			continue
		}
		first := len(t.Messages) // the messages of this content start here
		for j, p := range c.Parts {
			switch {
			case p.InlineData != nil || p.FileData != nil:
				img, err := decodeImage(p.InlineData, p.FileData)
				if err != nil {
					return t, fmt.Errorf("contents[%d].parts[%d]: %v", ci, j, err)
				}
				// An image belongs to the user text before it in the same
				// content, or starts a user message of its own.
				if n := len(t.Messages); n > first && t.Messages[n-1].Role == "user" {
					t.Messages[n-1].Images = append(t.Messages[n-1].Images, img)
				} else {
					t.Messages = append(t.Messages, providertest.Msg{Role: "user", Images: []media.Image{img}})
				}
			case p.FunctionResponse != nil:
				fr := p.FunctionResponse
				msg := providertest.Msg{Role: "tool", ToolName: fr.Name, ToolCallID: fr.ID}
				if out, ok := fr.Response["output"].(string); ok {
					msg.Content = out
				} else {
					b, _ := json.Marshal(fr.Response)
					msg.Content = string(b)
				}
				t.Messages = append(t.Messages, msg)
			case p.Text != nil:
				t.Messages = append(t.Messages, providertest.Msg{Role: "user", Content: *p.Text})
			}
		}
	}
	for _, tl := range req.Tools {
		for _, fd := range tl.FunctionDeclarations {
			t.Tools = append(t.Tools, fd.Name)
		}
	}
	if tc := req.ToolConfig; tc != nil && tc.FunctionCallingConfig != nil {
		if err := checkCalling(tc.FunctionCallingConfig.Mode, tc.FunctionCallingConfig.AllowedFunctionNames, t.Tools); err != nil {
			return providertest.Turn{}, err
		}
	}
	return t, nil
}

// checkCalling holds a functionCallingConfig to the documented rules: a
// known mode; allowedFunctionNames only with mode ANY (or VALIDATED),
// each the name of a declared function.
func checkCalling(mode string, allowed, declared []string) error {
	switch mode {
	case "", "MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED":
	default:
		return fmt.Errorf("Invalid value at 'tool_config.function_calling_config.mode' (type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), %q", mode)
	}
	if len(allowed) > 0 && mode != "ANY" && mode != "VALIDATED" {
		return fmt.Errorf("allowed_function_names may only be set when mode is ANY or VALIDATED")
	}
	for _, n := range allowed {
		if !slices.Contains(declared, n) {
			return fmt.Errorf("allowed_function_names %q does not name a declared function", n)
		}
	}
	return nil
}

// token serves the OAuth 2.0 JWT-bearer grant (RFC 7523) as Google's
// token endpoint does: it checks the RS256 signature of the assertion
// against PublicKey and its claims (aud is this endpoint, scope present,
// iat/exp current), and answers {access_token, expires_in, token_type}.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	fail := func(desc string) {
		writeError(w, 400, fmt.Sprintf(`{"error":"invalid_grant","error_description":%s}`, providertest.JSONString(desc)), "")
	}
	if err := r.ParseForm(); err != nil {
		fail("Bad request.")
		return
	}
	if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		writeError(w, 400, `{"error":"unsupported_grant_type","error_description":"Invalid grant_type: `+jsonEscape(r.PostForm.Get("grant_type"))+`"}`, "")
		return
	}
	segs := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(segs) != 3 {
		fail("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
		return
	}
	var a Assertion
	for i, dst := range []*map[string]any{&a.Header, &a.Claims} {
		b, err := base64.RawURLEncoding.DecodeString(segs[i])
		if err != nil || json.Unmarshal(b, dst) != nil {
			fail("Invalid JWT: cannot decode.")
			return
		}
	}
	if s.PublicKey == nil {
		fail("The fake has no public key to check the assertion with.")
		return
	}
	sig, err := base64.RawURLEncoding.DecodeString(segs[2])
	sum := sha256.Sum256([]byte(segs[0] + "." + segs[1]))
	if a.Header["alg"] != "RS256" || err != nil || rsa.VerifyPKCS1v15(s.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		fail("Invalid JWT Signature.")
		return
	}
	now := float64(time.Now().Unix())
	iat, _ := a.Claims["iat"].(float64)
	exp, _ := a.Claims["exp"].(float64)
	if aud := "http://" + r.Host + "/token"; a.Claims["aud"] != aud {
		fail(fmt.Sprintf("Invalid JWT: aud is %v, want %s.", a.Claims["aud"], aud))
		return
	}
	if iat > now+60 || exp < now || exp-iat > 3600 {
		fail("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
		return
	}
	if scope, _ := a.Claims["scope"].(string); scope == "" {
		fail("Invalid OAuth scope or ID token audience provided.")
		return
	}
	life := s.TokenLifetime
	if life <= 0 {
		life = 3600
	}
	s.mu.Lock()
	if s.tokens == nil {
		s.tokens = map[string]time.Time{}
	}
	s.assertions = append(s.assertions, a)
	tok := fmt.Sprintf("ya29.fake-token-%d", len(s.assertions))
	s.tokens[tok] = time.Now().Add(time.Duration(life) * time.Second)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	fmt.Fprintf(w, `{"access_token":%q,"expires_in":%d,"token_type":"Bearer"}`, tok, life)
}

func (s *Server) validBearer(h string) bool {
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.tokens[tok]
	return ok && time.Now().Before(exp)
}

// Assertions returns the JWT assertions the token endpoint accepted.
func (s *Server) Assertions() []Assertion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Assertion(nil), s.assertions...)
}

// Requests returns the model requests received, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func jsonEscape(s string) string {
	b := providertest.JSONString(s)
	return b[1 : len(b)-1]
}

// decodeImage checks an inlineData or fileData part as the API does (a
// mimeType, base64 data or a URI) and decodes it.
func decodeImage(inline *struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}, file *struct {
	MimeType string `json:"mimeType"`
	FileURI  string `json:"fileUri"`
}) (media.Image, error) {
	if inline != nil {
		if inline.MimeType == "" {
			return media.Image{}, fmt.Errorf("inlineData.mimeType: Request contains an invalid argument: the mime type is required")
		}
		data, err := base64.StdEncoding.DecodeString(inline.Data)
		if err != nil || len(data) == 0 {
			return media.Image{}, fmt.Errorf("Invalid value at 'contents.parts.inline_data.data' (TYPE_BYTES), Base64 decoding failed")
		}
		return media.Image{MediaType: inline.MimeType, Data: data}, nil
	}
	if file.MimeType == "" || file.FileURI == "" {
		return media.Image{}, fmt.Errorf("fileData: mimeType and fileUri are required")
	}
	return media.Image{MediaType: file.MimeType, URL: file.FileURI}, nil
}
