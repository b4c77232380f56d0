package provider

import (
	"encoding/json"
	"reflect"

	sjson "github.com/segmentio/encoding/json"
)

// DecodeJSON decodes data into v (a non-nil pointer) as encoding/json
// would, in one pass: segmentio's decoder reads what encoding/json reads
// without first scanning the whole text to validate it. A text it
// refuses is decoded again, into a zeroed v, by encoding/json, whose
// answer and error stand, so callers that build messages from
// encoding/json's errors see the same ones. Every answer and stream
// event of the OpenAI-compatible providers and every request body of nb
// serve's OpenAI API goes through here.
func DecodeJSON(data []byte, v any) error {
	if sjson.Unmarshal(data, v) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	return json.Unmarshal(data, v)
}
