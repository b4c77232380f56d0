package google

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// Backdrop placement follows the reference: the backdrop as a user turn,
// then a model turn acknowledging it, before the history.
const backdropAnswer = "Understood."

// DummySignature is the value Google documents for function calls whose
// thought signature is unknown (a conversation started with another
// provider): Gemini 3 refuses a function call without a signature.
// https://ai.google.dev/gemini-api/docs/thought-signatures
const DummySignature = "skip_thought_signature_validator"

// Body builds the request body: the cartridge's settings verbatim (nulls
// dropped; model and stream removed, as they are nb's options, not API
// fields), then contents, systemInstruction and tools; a forced tool
// choice is toolConfig.functionCallingConfig {mode: ANY,
// allowedFunctionNames: [name]}.
func (c *Client) Body(req provider.Request) (map[string]any, error) {
	contents, err := Contents(req)
	if err != nil {
		return nil, err
	}
	body := c.cfg.BodyFor(req)
	delete(body, "model")
	delete(body, "stream")
	if len(req.Stop) > 0 || req.Output != nil {
		gc, _ := body["generationConfig"].(map[string]any)
		if gc == nil {
			gc = map[string]any{}
		}
		if len(req.Stop) > 0 {
			gc["stopSequences"] = req.Stop
		}
		if req.Output != nil {
			gc["responseMimeType"] = "application/json"
			gc["responseSchema"] = Schema(plain(req.Output.Schema))
		}
		body["generationConfig"] = gc
	}
	provider.ApplyEffort(body, c.effort, "generationConfig.thinkingConfig.thinkingBudget", true)
	body["contents"] = contents
	if req.System != "" {
		body["systemInstruction"] = map[string]any{"parts": []any{map[string]any{"text": req.System}}}
	}
	if len(req.Tools) > 0 {
		// Tools the settings already hold (googleSearch, codeExecution)
		// are kept; the cartridge's functions are added after them.
		var tools []any
		if t, ok := body["tools"].([]any); ok {
			tools = t
		}
		body["tools"] = append(tools, map[string]any{"functionDeclarations": FunctionDeclarations(req.Tools)})
		if req.ToolChoice != "" {
			// Mode ANY with the one allowed name forces its call; the
			// rest of the settings' toolConfig (retrievalConfig) is kept.
			tc, _ := body["toolConfig"].(map[string]any)
			if tc == nil {
				tc = map[string]any{}
			}
			tc["functionCallingConfig"] = map[string]any{"mode": "ANY", "allowedFunctionNames": []any{req.ToolChoice}}
			body["toolConfig"] = tc
		}
	} else if _, ok := body["tools"]; !ok {
		delete(body, "toolConfig")
	}
	if err := req.Override.Apply(body, ID, samplingNames); err != nil {
		return nil, err
	}
	return body, nil
}

// samplingNames are where Gemini takes the sampling settings: its
// generationConfig.
var samplingNames = provider.SamplingNames{Temperature: "generationConfig.temperature", TopP: "generationConfig.topP",
	TopK: "generationConfig.topK", MaxTokens: "generationConfig.maxOutputTokens",
	Seed: "generationConfig.seed", PresencePenalty: "generationConfig.presencePenalty", FrequencyPenalty: "generationConfig.frequencyPenalty"}

// Contents maps the conversation to Gemini contents. Roles are user and
// model; tool calls become functionCall parts of a model content and tool
// results functionResponse parts ({name, response: {output}}) of a user
// content; consecutive contents of one role are merged, since Gemini wants
// them to alternate, so the results of one round travel together in call
// order. Thought signatures kept in Message.Extra["google"] go back on the
// parts they came with. Images are inlineData parts ({mimeType, data} in
// base64) or, given by URL, fileData parts ({mimeType, fileUri}) after the
// text of a user message; the images of tool results follow the round's
// functionResponse parts in the same user content, each tool's introduced
// by a text part naming it. It fails with a *provider.UnsupportedError on
// images in assistant messages and on a URL image without a media type.
func Contents(req provider.Request) ([]any, error) {
	var out []any
	var lastRole string
	add := func(role string, parts ...any) {
		if len(parts) == 0 {
			return
		}
		if role == lastRole {
			c := out[len(out)-1].(map[string]any)
			c["parts"] = append(c["parts"].([]any), parts...)
			return
		}
		out = append(out, map[string]any{"role": role, "parts": parts})
		lastRole = role
	}
	if req.Backdrop != "" {
		add("user", map[string]any{"text": req.Backdrop})
		add("model", map[string]any{"text": backdropAnswer})
	}
	// Ids Gemini itself gave go back in functionCall.id and
	// functionResponse.id; synthetic and foreign ids are not sent.
	googleIDs := map[string]bool{}
	names := map[string]string{}
	for _, m := range req.Messages {
		for _, id := range extraOf(m).CallIDs {
			googleIDs[id] = true
		}
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Name
		}
	}
	// pending holds the image parts of the tool results of the current
	// round, added after its functionResponse parts.
	var pending []any
	for _, m := range req.Messages {
		images, err := imageParts(m)
		if err != nil {
			return nil, err
		}
		if m.Role != provider.RoleTool && len(pending) > 0 {
			add("user", pending...)
			pending = nil
		}
		switch m.Role {
		case provider.RoleAssistant:
			x := extraOf(m)
			var parts []any
			if m.Content != "" {
				p := map[string]any{"text": m.Content}
				if x.TextSignature != "" {
					p["thoughtSignature"] = x.TextSignature
				}
				parts = append(parts, p)
			}
			for i, tc := range m.ToolCalls {
				fc := map[string]any{"name": tc.Name, "args": arguments(tc.Arguments)}
				if googleIDs[tc.ID] {
					fc["id"] = tc.ID
				}
				p := map[string]any{"functionCall": fc}
				switch sig := x.Signatures[tc.ID]; {
				case sig != "":
					p["thoughtSignature"] = sig
				case i == 0 && !x.present:
					p["thoughtSignature"] = DummySignature
				}
				parts = append(parts, p)
			}
			add("model", parts...)
		case provider.RoleTool:
			name := m.ToolName
			if name == "" {
				name = names[m.ToolCallID]
			}
			fr := map[string]any{"name": name, "response": map[string]any{"output": m.Content}}
			if googleIDs[m.ToolCallID] {
				fr["id"] = m.ToolCallID
			}
			add("user", map[string]any{"functionResponse": fr})
			if len(images) > 0 {
				pending = append(pending, map[string]any{"text": fmt.Sprintf("The images returned by the tool %s:", name)})
				pending = append(pending, images...)
			}
		default:
			var parts []any
			if m.Content != "" || len(images) == 0 {
				parts = append(parts, map[string]any{"text": m.Content})
			}
			add("user", append(parts, images...)...)
		}
	}
	add("user", pending...)
	return out, nil
}

// imageParts maps a message's images to inlineData and fileData parts.
func imageParts(m provider.Message) ([]any, error) {
	if len(m.Images) == 0 {
		return nil, nil
	}
	if m.Role == provider.RoleAssistant {
		return nil, &provider.UnsupportedError{Provider: ID, Feature: "images in assistant messages"}
	}
	parts := make([]any, len(m.Images))
	for i, img := range m.Images {
		switch {
		case len(img.Data) > 0:
			parts[i] = map[string]any{"inlineData": map[string]any{"mimeType": img.MediaType, "data": base64.StdEncoding.EncodeToString(img.Data)}}
		case img.URL != "" && img.MediaType != "":
			parts[i] = map[string]any{"fileData": map[string]any{"mimeType": img.MediaType, "fileUri": img.URL}}
		case img.URL != "":
			return nil, &provider.UnsupportedError{Provider: ID, Feature: "images given by URL without a media type",
				Hint: "Gemini's fileData needs the image's type; send the image's bytes instead"}
		default:
			return nil, &provider.UnsupportedError{Provider: ID, Feature: "images without data or URL"}
		}
	}
	return parts, nil
}

// arguments parses a call's JSON arguments into the object Gemini wants.
func arguments(s string) map[string]any {
	var v any
	if s == "" || json.Unmarshal([]byte(s), &v) != nil {
		if s == "" {
			return map[string]any{}
		}
		return map[string]any{"arguments": s}
	}
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{"arguments": v}
}

// Extra is what a Gemini answer keeps in Message.Extra["google"] so the
// next request can send it back.
type Extra struct {
	// Signatures are the thoughtSignature of each functionCall part, by call id.
	Signatures map[string]string `json:"thoughtSignatures,omitempty"`
	// TextSignature is the signature that came on a text part.
	TextSignature string `json:"textSignature,omitempty"`
	// CallIDs are the call ids Gemini gave itself (newer models send them).
	CallIDs []string `json:"callIds,omitempty"`
	// present is true when the message came from Gemini at all.
	present bool
}

// Map is the form stored in Message.Extra (plain JSON values, as a state
// file gives them back).
func (x Extra) Map() map[string]any {
	m := map[string]any{}
	if len(x.Signatures) > 0 {
		s := map[string]any{}
		for k, v := range x.Signatures {
			s[k] = v
		}
		m["thoughtSignatures"] = s
	}
	if x.TextSignature != "" {
		m["textSignature"] = x.TextSignature
	}
	if len(x.CallIDs) > 0 {
		ids := make([]any, len(x.CallIDs))
		for i, id := range x.CallIDs {
			ids[i] = id
		}
		m["callIds"] = ids
	}
	return m
}

func extraOf(m provider.Message) Extra {
	raw, ok := m.Extra[ID]
	if !ok || raw == nil {
		return Extra{}
	}
	var x Extra
	if b, err := json.Marshal(raw); err == nil {
		json.Unmarshal(b, &x) //nolint:errcheck // a malformed entry is treated as empty
	}
	x.present = true
	return x
}

// FunctionDeclarations maps tool specs to Gemini function declarations.
// Parameters go through Schema; an object without properties is left out,
// since Gemini refuses an OBJECT schema with no properties.
func FunctionDeclarations(tools []tool.Spec) []any {
	out := make([]any, len(tools))
	for i, t := range tools {
		fd := map[string]any{"name": t.Name}
		if t.Description != "" {
			fd["description"] = t.Description
		}
		if p := Schema(plain(t.Parameters)); p != nil {
			if props, ok := p["properties"].(map[string]any); !ok || len(props) > 0 || p["type"] != "object" {
				fd["parameters"] = p
			}
		}
		out[i] = fd
	}
	return out
}

// schemaKeys are the fields of Gemini's Schema object (an OpenAPI 3.0
// subset); other JSON-Schema keywords ($schema, additionalProperties,
// $ref, ...) are refused by the API and left out.
var schemaKeys = map[string]bool{
	"type": true, "format": true, "title": true, "description": true, "nullable": true,
	"enum": true, "maxItems": true, "minItems": true, "properties": true, "required": true,
	"minProperties": true, "maxProperties": true, "minLength": true, "maxLength": true,
	"pattern": true, "example": true, "anyOf": true, "propertyOrdering": true, "default": true,
	"items": true, "minimum": true, "maximum": true,
}

// Schema reduces a JSON Schema to what Gemini's Schema accepts: unknown
// keywords dropped, a type list with "null" turned into nullable, const
// into a one-value enum, oneOf into anyOf, and required limited to the
// properties that exist.
func Schema(s map[string]any) map[string]any {
	if s == nil {
		return nil
	}
	out := map[string]any{}
	for k, v := range s {
		switch k {
		case "type":
			if list, ok := v.([]any); ok {
				var types []any
				for _, t := range list {
					if t == "null" {
						out["nullable"] = true
					} else {
						types = append(types, t)
					}
				}
				if len(types) == 1 {
					out["type"] = types[0]
				} else if len(types) > 1 {
					alts := make([]any, 0, len(types))
					for _, t := range types {
						alts = append(alts, map[string]any{"type": t})
					}
					out["anyOf"] = alts
				}
				continue
			}
			out[k] = v
		case "const":
			out["enum"] = []any{fmt.Sprint(v)}
		case "enum":
			if list, ok := v.([]any); ok {
				strs := make([]any, 0, len(list))
				for _, e := range list {
					if e != nil {
						strs = append(strs, fmt.Sprint(e))
					}
				}
				out[k] = strs
			}
		case "properties":
			if props, ok := v.(map[string]any); ok {
				p := make(map[string]any, len(props))
				for name, sub := range props {
					if m, ok := sub.(map[string]any); ok {
						p[name] = Schema(m)
					}
				}
				out[k] = p
			}
		case "items":
			if m, ok := v.(map[string]any); ok {
				out[k] = Schema(m)
			}
		case "anyOf", "oneOf":
			if list, ok := v.([]any); ok {
				subs := make([]any, 0, len(list))
				for _, sub := range list {
					if m, ok := sub.(map[string]any); ok {
						subs = append(subs, Schema(m))
					}
				}
				// A null alternative is Gemini's nullable; a single
				// alternative left is the schema itself.
				kept := subs[:0]
				for _, sub := range subs {
					m := sub.(map[string]any)
					if len(m) == 1 && m["type"] == "null" {
						out["nullable"] = true
						continue
					}
					kept = append(kept, m)
				}
				if len(kept) == 1 {
					for k, v := range kept[0].(map[string]any) {
						if _, taken := out[k]; !taken {
							out[k] = v
						}
					}
				} else if len(kept) > 1 {
					out["anyOf"] = kept
				}
			}
		default:
			if schemaKeys[k] {
				out[k] = v
			}
		}
	}
	if req, ok := out["required"].([]any); ok {
		props, _ := out["properties"].(map[string]any)
		kept := make([]any, 0, len(req))
		for _, r := range req {
			if name, ok := r.(string); ok {
				if _, exists := props[name]; exists {
					kept = append(kept, name)
				}
			}
		}
		if len(kept) > 0 {
			out["required"] = kept
		} else {
			delete(out, "required")
		}
	}
	return out
}

// plain gives a schema built in Go ([]string, typed maps) the shape JSON
// decoding gives, which Schema walks.
func plain(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	var out map[string]any
	if b, err := json.Marshal(m); err == nil {
		json.Unmarshal(b, &out) //nolint:errcheck // it was just encoded
	}
	return out
}
