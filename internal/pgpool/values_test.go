package pgpool

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func col(name string, oid uint32) pgconn.FieldDescription {
	return pgconn.FieldDescription{Name: name, DataTypeOID: oid, Format: binaryFormat}
}

func be64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// wantColumnErr fails unless err is a ColumnError naming column and
// saying what.
func wantColumnErr(t *testing.T, err error, column, what string) {
	t.Helper()
	var ce *ColumnError
	if !errors.As(err, &ce) || ce.Column != column || !strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), `"`+column+`"`) {
		t.Errorf("error %v, want one naming column %q and saying %q", err, column, what)
	}
}

func TestText(t *testing.T) {
	for _, oid := range []uint32{oidText, oidVarchar, oidBPChar, oidName, oidJSON, oidBytea} {
		if s, err := Text(col("bot", oid), []byte("a\x00é")); err != nil || s != "a\x00é" {
			t.Errorf("type %d: %q, %v", oid, s, err)
		}
	}
	if s, err := Text(col("bot", oidText), []byte{}); err != nil || s != "" {
		t.Errorf("empty: %q, %v", s, err)
	}
	_, err := Text(col("bot", oidText), nil)
	wantColumnErr(t, err, "bot", "NULL")
	_, err = Text(col("n", oidInt8), be64(1))
	wantColumnErr(t, err, "n", "not text")
	_, err = Text(pgconn.FieldDescription{Name: "t", DataTypeOID: oidText, Format: textFormat}, []byte("x"))
	wantColumnErr(t, err, "t", "text form")
}

func TestBytes(t *testing.T) {
	if b, err := Bytes(col("data", oidBytea), []byte{0, 1, 255}); err != nil || !bytes.Equal(b, []byte{0, 1, 255}) {
		t.Errorf("bytea: %v, %v", b, err)
	}
	if b, err := Bytes(col("data", oidBytea), nil); err != nil || b != nil {
		t.Errorf("NULL: %v, %v", b, err)
	}
	if b, err := Bytes(col("data", oidBytea), []byte{}); err != nil || b == nil || len(b) != 0 {
		t.Errorf("empty bytea: %#v, %v (want empty, not nil)", b, err)
	}
	_, err := Bytes(col("ok", oidBool), []byte{1})
	wantColumnErr(t, err, "ok", "not text or bytes")
}

func TestJSONB(t *testing.T) {
	if s, err := Text(col("doc", oidJSONB), append([]byte{1}, `{"a":1}`...)); err != nil || s != `{"a":1}` {
		t.Errorf("jsonb: %q, %v", s, err)
	}
	_, err := Text(col("doc", oidJSONB), append([]byte{2}, `{}`...))
	wantColumnErr(t, err, "doc", "version")
	_, err = Text(col("doc", oidJSONB), []byte{})
	wantColumnErr(t, err, "doc", "version")
	if b, err := Bytes(col("doc", oidJSONB), nil); err != nil || b != nil {
		t.Errorf("NULL jsonb: %v, %v", b, err)
	}
}

func TestInt(t *testing.T) {
	for _, tc := range []struct {
		oid  uint32
		v    []byte
		want int64
	}{
		{oidInt8, be64(-5), -5},
		{oidInt8, be64(1 << 62), 1 << 62},
		{oidInt4, binary.BigEndian.AppendUint32(nil, 0xFFFFFFFF), -1},
		{oidInt4, binary.BigEndian.AppendUint32(nil, 7), 7},
		{oidInt2, binary.BigEndian.AppendUint16(nil, 0xFFFE), -2},
	} {
		if n, err := Int(col("n", tc.oid), tc.v); err != nil || n != tc.want {
			t.Errorf("type %d % x: %d, %v; want %d", tc.oid, tc.v, n, err, tc.want)
		}
	}
	_, err := Int(col("events", oidInt8), nil)
	wantColumnErr(t, err, "events", "NULL")
	_, err = Int(col("events", oidInt8), []byte{1, 2, 3, 4})
	wantColumnErr(t, err, "events", "4 bytes")
	_, err = Int(col("events", oidText), []byte("12"))
	wantColumnErr(t, err, "events", "not an integer")
	var small int16
	err = scanValue(col("status", oidInt4), binary.BigEndian.AppendUint32(nil, 70000), &small)
	wantColumnErr(t, err, "status", "does not fit")
}

func TestBool(t *testing.T) {
	for v, want := range map[byte]bool{0: false, 1: true} {
		if b, err := Bool(col("done", oidBool), []byte{v}); err != nil || b != want {
			t.Errorf("%d: %v, %v", v, b, err)
		}
	}
	_, err := Bool(col("done", oidBool), nil)
	wantColumnErr(t, err, "done", "NULL")
	_, err = Bool(col("done", oidBool), []byte{2})
	wantColumnErr(t, err, "done", "boolean")
	_, err = Bool(col("done", oidInt4), []byte{0, 0, 0, 1})
	wantColumnErr(t, err, "done", "not a boolean")
}

func TestTime(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC)
	for _, tm := range []time.Time{at, epoch, time.Date(1970, 1, 1, 0, 0, 0, 1000, time.UTC), time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC)} {
		got, err := Time(col("created", oidTimestamptz), be64(micros(tm)))
		if err != nil || !got.Equal(tm) {
			t.Errorf("%v: %v, %v", tm, got, err)
		}
		if got.Location() != time.Local {
			t.Errorf("%v: in %v, want the local zone", tm, got.Location())
		}
	}
	// PostgreSQL's own bytes for 2000-01-02 00:00:00.5 UTC.
	if got, err := Time(col("t", oidTimestamptz), be64(86_400_500_000)); err != nil || !got.Equal(time.Date(2000, 1, 2, 0, 0, 0, 5e8, time.UTC)) {
		t.Errorf("a day and a half second after the epoch: %v, %v", got, err)
	}
	if got, err := Time(col("t", oidTimestamp), be64(0)); err != nil || got != epoch {
		t.Errorf("timestamp: %v, %v", got, err)
	}
	_, err := Time(col("created", oidTimestamptz), nil)
	wantColumnErr(t, err, "created", "NULL")
	_, err = Time(col("created", oidTimestamptz), be64(1<<63-1))
	wantColumnErr(t, err, "created", "infinite")
	_, err = Time(col("created", oidTimestamptz), []byte{1})
	wantColumnErr(t, err, "created", "1 bytes")
	var p *time.Time = &at
	if err := scanValue(col("finished", oidTimestamptz), nil, &p); err != nil || p != nil {
		t.Errorf("NULL into **time.Time: %v, %v", p, err)
	}
}

func TestInterval(t *testing.T) {
	v := append(be64(1_500_000), 0, 0, 0, 2, 0, 0, 0, 1) // 1.5 s, 2 days, 1 month
	if d, err := Interval(col("ago", oidInterval), v); err != nil || d != 32*24*time.Hour+1500*time.Millisecond {
		t.Errorf("%v, %v", d, err)
	}
	_, err := Interval(col("ago", oidInterval), nil)
	wantColumnErr(t, err, "ago", "NULL")
	d := new(time.Duration)
	if err := scanValue(col("ago", oidInterval), nil, &d); err != nil || d != nil {
		t.Errorf("NULL into **time.Duration: %v, %v", d, err)
	}
}

func TestScanRow(t *testing.T) {
	fields := []pgconn.FieldDescription{col("id", oidText), col("n", oidInt4), col("cp", oidBytea)}
	var id string
	var n int
	var cp []byte
	if err := scanRow(fields, [][]byte{[]byte("r1"), {0, 0, 0, 9}, nil}, []any{&id, &n, &cp}); err != nil || id != "r1" || n != 9 || cp != nil {
		t.Errorf("%q %d %v: %v", id, n, cp, err)
	}
	if err := scanRow(fields, [][]byte{[]byte("r1"), {0, 0, 0, 9}, nil}, []any{&id}); err == nil {
		t.Error("one destination for three columns")
	}
	var f complex64
	err := scanRow(fields[:1], [][]byte{[]byte("x")}, []any{&f})
	wantColumnErr(t, err, "id", "complex64")
}

func TestEncode(t *testing.T) {
	at := time.Date(2000, 1, 2, 0, 0, 0, 5e8, time.UTC)
	var nilTime *time.Time
	p, err := encode([]any{"bot", []byte{0, 1}, true, int16(-2), 7, at, nilTime, nil, 1500 * time.Millisecond, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		v      []byte
		oid    uint32
		format int16
	}{
		{[]byte("bot"), unspecified, textFormat},
		{[]byte{0, 1}, oidBytea, binaryFormat},
		{[]byte{1}, oidBool, binaryFormat},
		{[]byte{0xFF, 0xFE}, oidInt2, binaryFormat},
		{be64(7), oidInt8, binaryFormat},
		{be64(86_400_500_000), oidTimestamptz, binaryFormat},
		{nil, oidTimestamptz, binaryFormat},
		{nil, unspecified, textFormat},
		{append(be64(1_500_000), 0, 0, 0, 0, 0, 0, 0, 0), oidInterval, binaryFormat},
		{[]byte{0x3F, 0xE0, 0, 0, 0, 0, 0, 0}, oidFloat8, binaryFormat},
	}
	for i, w := range want {
		if !bytes.Equal(p.values[i], w.v) || (p.values[i] == nil) != (w.v == nil) || p.oids[i] != w.oid || p.formats[i] != w.format {
			t.Errorf("$%d: % x type %d format %d; want % x type %d format %d", i+1, p.values[i], p.oids[i], p.formats[i], w.v, w.oid, w.format)
		}
	}
	if _, err := encode([]any{"a", struct{}{}}); err == nil || !strings.Contains(err.Error(), "$2") {
		t.Errorf("an unknown type: %v", err)
	}
	if _, err := encode([]any{[][]byte{{1}, nil}}); err == nil {
		t.Error("a nil bytea[] element was sent")
	}
	// text[] {"a",""}: 1 dimension, no NULLs, text, 2 elements from 1.
	arr, _ := encode([]any{[]string{"a", ""}})
	wantArr := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 25, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 'a', 0, 0, 0, 0}
	if !bytes.Equal(arr.values[0], wantArr) || arr.oids[0] != oidTextArray {
		t.Errorf("text[]: % x type %d", arr.values[0], arr.oids[0])
	}
}
