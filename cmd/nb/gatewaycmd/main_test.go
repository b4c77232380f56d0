package gatewaycmd

// The configurations of these tests name OpenAI-compatible providers;
// cmd/nb links every provider.
import _ "github.com/nbots/nb/provider/openai"
