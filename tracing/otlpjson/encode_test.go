package otlpjson

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

func ptr[T any](v T) *T { return &v }

// The request is JSON that decodes to what was recorded, whatever the
// strings hold and whatever the attribute's type; ids are hex, integers
// and times are strings, a name is its two parts.
func TestAppendRequest(t *testing.T) {
	tricky := "quote\" backslash\\ nl\n tab\t ctl\x01 bad\xff ls\u2028 é 😀 <&>"
	scope := &Scope{Name: "nb", Version: "1"}
	other := &Scope{Name: "lib"}
	start := time.Unix(1700000000, 1)
	s := &SpanData{
		Scope: scope, TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{0xcd, 2}, Parent: trace.SpanID{3}, ParentRemote: true,
		Flags: trace.FlagsSampled, Name: "chat ", NameSuffix: tricky, Kind: trace.SpanKindClient, Start: start, End: start.Add(time.Millisecond),
		Attributes: []attribute.KeyValue{
			attribute.String("s", tricky), attribute.Bool("b", true), attribute.Int64("i", math.MinInt64), attribute.Float64("f", 0.1),
			attribute.Float64("nan", math.NaN()), attribute.Float64("inf", math.Inf(-1)), attribute.Float64("big", 1e300),
			attribute.StringSlice("ss", []string{"a", tricky}), attribute.Int64Slice("is", []int64{1, -2}), attribute.BoolSlice("bs", []bool{false}),
			attribute.Float64Slice("fs", []float64{1.5}), attribute.StringSlice("empty", nil),
			{Key: "bytes", Value: attribute.ByteSliceValue([]byte{0, 255})},
			{Key: "slice", Value: attribute.SliceValue(attribute.IntValue(7), attribute.StringValue("x"))},
			{Key: "map", Value: attribute.MapValue(attribute.String("k", "v"))},
			{Key: "none", Value: attribute.Value{}},
		},
		DroppedAttributes: 2,
		Events:            []EventData{{Time: start, Name: "exception", Attributes: []attribute.KeyValue{attribute.String("exception.message", tricky)}}},
		Status:            codes.Error, StatusMessage: tricky,
	}
	o := &SpanData{Scope: other, TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Name: "plain", Status: codes.Ok}
	n := &SpanData{Scope: scope, TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, Name: "second"}
	b := AppendRequest([]byte("junk"), []attribute.KeyValue{attribute.String("service.name", "nb")}, []*SpanData{s, o, n})
	if !bytes.HasPrefix(b, []byte("junk{")) {
		t.Fatalf("not appended: %.20s", b)
	}
	b = b[len("junk"):]
	if !json.Valid(b) {
		t.Fatalf("invalid JSON: %s", b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var req Request
	if err := dec.Decode(&req); err != nil {
		t.Fatal(err)
	}
	fix := "quote\" backslash\\ nl\n tab\t ctl\x01 bad\ufffd ls\u2028 é 😀 <&>"
	want := Request{ResourceSpans: []ResourceSpans{{
		Resource: Resource{Attributes: []KeyValue{{Key: "service.name", Value: AnyValue{StringValue: ptr("nb")}}}},
		ScopeSpans: []ScopeSpans{
			{Scope: Scope{Name: "nb", Version: "1"}, Spans: []Span{{
				TraceID: "ab010000000000000000000000000000", SpanID: "cd02000000000000", ParentSpanID: "0300000000000000", Flags: 0x301,
				Name: "chat " + fix, Kind: 3, StartTimeUnixNano: "1700000000000000001", EndTimeUnixNano: "1700000000001000001",
				Attributes: []KeyValue{
					{Key: "s", Value: AnyValue{StringValue: ptr(fix)}},
					{Key: "b", Value: AnyValue{BoolValue: ptr(true)}},
					{Key: "i", Value: AnyValue{IntValue: ptr("-9223372036854775808")}},
					{Key: "f", Value: AnyValue{DoubleValue: 0.1}},
					{Key: "nan", Value: AnyValue{DoubleValue: "NaN"}},
					{Key: "inf", Value: AnyValue{DoubleValue: "-Infinity"}},
					{Key: "big", Value: AnyValue{DoubleValue: 1e300}},
					{Key: "ss", Value: AnyValue{ArrayValue: &ArrayValue{Values: []AnyValue{{StringValue: ptr("a")}, {StringValue: ptr(fix)}}}}},
					{Key: "is", Value: AnyValue{ArrayValue: &ArrayValue{Values: []AnyValue{{IntValue: ptr("1")}, {IntValue: ptr("-2")}}}}},
					{Key: "bs", Value: AnyValue{ArrayValue: &ArrayValue{Values: []AnyValue{{BoolValue: ptr(false)}}}}},
					{Key: "fs", Value: AnyValue{ArrayValue: &ArrayValue{Values: []AnyValue{{DoubleValue: 1.5}}}}},
					{Key: "empty", Value: AnyValue{ArrayValue: &ArrayValue{Values: []AnyValue{}}}},
					{Key: "bytes", Value: AnyValue{BytesValue: ptr("AP8=")}},
					{Key: "slice", Value: AnyValue{ArrayValue: &ArrayValue{Values: []AnyValue{{IntValue: ptr("7")}, {StringValue: ptr("x")}}}}},
					{Key: "map", Value: AnyValue{KvlistValue: &KvList{Values: []KeyValue{{Key: "k", Value: AnyValue{StringValue: ptr("v")}}}}}},
					{Key: "none"},
				},
				DroppedAttributes: 2,
				Events:            []Event{{TimeUnixNano: "1700000000000000001", Name: "exception", Attributes: []KeyValue{{Key: "exception.message", Value: AnyValue{StringValue: ptr(fix)}}}}},
				Status:            &Status{Code: 2, Message: fix},
			}, {
				TraceID: "01000000000000000000000000000000", SpanID: "0200000000000000", Flags: 0x100, Name: "second", Kind: 1,
				StartTimeUnixNano: "0", EndTimeUnixNano: "0",
			}}},
			{Scope: Scope{Name: "lib"}, Spans: []Span{{
				TraceID: "01000000000000000000000000000000", SpanID: "0100000000000000", Flags: 0x100, Name: "plain", Kind: 1,
				StartTimeUnixNano: "0", EndTimeUnixNano: "0", Status: &Status{Code: 1},
			}}},
		},
	}}}
	if d := cmp.Diff(want, req); d != "" {
		t.Errorf("decoded request (-want +got):\n%s", d)
	}
	if bytes.Contains(b, []byte("\u2028")) || !bytes.Contains(b, []byte(`\u2028`)) || !bytes.Contains(b, []byte(`\u0001`)) {
		t.Errorf("escapes: %s", b)
	}
}

// Encoding reuses the buffer: a batch allocates nothing once it has grown.
func TestAppendRequestAllocates(t *testing.T) {
	spans := []*SpanData{{Name: "chat ", NameSuffix: "m", Attributes: []attribute.KeyValue{attribute.String("a", "b"), attribute.Int("n", 3)}}}
	buf := AppendRequest(nil, nil, spans)
	if n := testing.AllocsPerRun(100, func() { buf = AppendRequest(buf[:0], nil, spans) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
