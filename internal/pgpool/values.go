package pgpool

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The type OIDs of PostgreSQL (pg_type.oid) that nb sends or reads.
const (
	oidBool    = 16
	oidBytea   = 17
	oidName    = 19
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidText    = 25
	oidJSON    = 114
	oidFloat4  = 700
	oidFloat8  = 701
	oidUnknown = 705
	// unspecified lets PostgreSQL infer a parameter's type from its place
	// in the statement, as it does a literal's.
	unspecified    = 0
	oidByteaArray  = 1001
	oidTextArray   = 1009
	oidBPChar      = 1042
	oidVarchar     = 1043
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidInterval    = 1186
	oidVoid        = 2278
	oidJSONB       = 3802
)

// Formats of a parameter or a column on the wire.
const (
	textFormat   = 0
	binaryFormat = 1
)

// binaryResults asks for every column in binary form, which this
// package decodes whatever the session's settings (DateStyle, TimeZone,
// bytea_output).
var binaryResults = []int16{binaryFormat}

// epoch is PostgreSQL's zero time: timestamps count microseconds from it.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// params are a statement's parameters in the form ExecParams takes.
type params struct {
	values  [][]byte
	oids    []uint32
	formats []int16
}

// encode turns args into parameters. A string is sent as text of an
// unknown type, so that PostgreSQL gives it the type its place in the
// statement calls for, as it would a literal; the other values are sent
// in binary with their type: []byte as bytea, bool, int16 as smallint,
// int, int32 and int64 as bigint, float64 as double precision, time.Time
// as timestamptz, time.Duration as interval, []string as text[] and
// [][]byte as bytea[]. nil, and a nil pointer to one of those, is NULL.
func encode(args []any) (params, error) {
	p := params{values: make([][]byte, len(args)), oids: make([]uint32, len(args)), formats: make([]int16, len(args))}
	for i, a := range args {
		v, oid, format, err := encodeOne(a)
		if err != nil {
			return p, fmt.Errorf("parameter $%d: %w", i+1, err)
		}
		p.values[i], p.oids[i], p.formats[i] = v, oid, format
	}
	return p, nil
}

func encodeOne(a any) (value []byte, oid uint32, format int16, err error) {
	switch v := a.(type) {
	case nil:
		return nil, unspecified, textFormat, nil
	case string:
		return []byte(v), unspecified, textFormat, nil
	case []byte: // nil is NULL
		return v, oidBytea, binaryFormat, nil
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		return []byte{b}, oidBool, binaryFormat, nil
	case int16:
		return binary.BigEndian.AppendUint16(nil, uint16(v)), oidInt2, binaryFormat, nil
	case int32:
		return int8Bytes(int64(v)), oidInt8, binaryFormat, nil
	case int:
		return int8Bytes(int64(v)), oidInt8, binaryFormat, nil
	case int64:
		return int8Bytes(v), oidInt8, binaryFormat, nil
	case float64:
		return binary.BigEndian.AppendUint64(nil, math.Float64bits(v)), oidFloat8, binaryFormat, nil
	case time.Time:
		return int8Bytes(micros(v)), oidTimestamptz, binaryFormat, nil
	case *time.Time:
		if v == nil {
			return nil, oidTimestamptz, binaryFormat, nil
		}
		return int8Bytes(micros(*v)), oidTimestamptz, binaryFormat, nil
	case *string:
		if v == nil {
			return nil, unspecified, textFormat, nil
		}
		return []byte(*v), unspecified, textFormat, nil
	case *int64:
		if v == nil {
			return nil, oidInt8, binaryFormat, nil
		}
		return int8Bytes(*v), oidInt8, binaryFormat, nil
	case time.Duration:
		// microseconds, days, months
		b := int8Bytes(v.Microseconds())
		return append(b, 0, 0, 0, 0, 0, 0, 0, 0), oidInterval, binaryFormat, nil
	case []string:
		items := make([][]byte, len(v))
		for i, s := range v {
			items[i] = []byte(s)
		}
		return encodeArray(items, oidText), oidTextArray, binaryFormat, nil
	case [][]byte:
		for i, b := range v {
			if b == nil { // a NULL element: nb never means one
				return nil, 0, 0, fmt.Errorf("element %d of a bytea[] is nil", i+1)
			}
		}
		return encodeArray(v, oidBytea), oidByteaArray, binaryFormat, nil
	default:
		return nil, 0, 0, fmt.Errorf("a %T cannot be sent", a)
	}
}

func int8Bytes(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// micros is t as PostgreSQL's timestamp: microseconds since 2000-01-01
// UTC.
func micros(t time.Time) int64 {
	return t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - epoch.Unix()*1_000_000
}

// encodeArray is the binary form of a one-dimensional array without
// NULLs: dimensions, has-nulls, element type, then length and lower
// bound, then each element's length and bytes.
func encodeArray(items [][]byte, elem uint32) []byte {
	n := 20
	for _, it := range items {
		n += 4 + len(it)
	}
	b := make([]byte, 0, n)
	if len(items) == 0 {
		b = binary.BigEndian.AppendUint32(b, 0) // no dimensions: {}
		b = binary.BigEndian.AppendUint32(b, 0)
		return binary.BigEndian.AppendUint32(b, elem)
	}
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, elem)
	b = binary.BigEndian.AppendUint32(b, uint32(len(items)))
	b = binary.BigEndian.AppendUint32(b, 1)
	for _, it := range items {
		b = binary.BigEndian.AppendUint32(b, uint32(len(it)))
		b = append(b, it...)
	}
	return b
}

// ColumnError is a value of a result that cannot be read as asked: it
// names the column.
type ColumnError struct {
	Column string // the column's name in the result
	Err    error
}

func (e *ColumnError) Error() string { return fmt.Sprintf("column %q: %v", e.Column, e.Err) }

// Unwrap returns what went wrong.
func (e *ColumnError) Unwrap() error { return e.Err }

func columnErr(fd pgconn.FieldDescription, format string, args ...any) error {
	return &ColumnError{Column: fd.Name, Err: fmt.Errorf(format, args...)}
}

// errNull is what a NULL gives a destination that cannot hold it.
func errNull(fd pgconn.FieldDescription, dst string) error {
	return columnErr(fd, "NULL cannot be read into a %s", dst)
}

// checkBinary refuses a value PostgreSQL sent as text: every decoder
// here reads the binary forms.
func checkBinary(fd pgconn.FieldDescription) error {
	if fd.Format != binaryFormat {
		return columnErr(fd, "sent in text form, not binary")
	}
	return nil
}

// Bytes decodes a bytea, text, varchar, char, name, json or jsonb value
// (jsonb without its version byte); NULL is nil.
func Bytes(fd pgconn.FieldDescription, v []byte) ([]byte, error) {
	if err := checkBinary(fd); err != nil {
		return nil, err
	}
	if v == nil {
		return nil, nil
	}
	switch fd.DataTypeOID {
	case oidBytea, oidText, oidVarchar, oidBPChar, oidName, oidJSON, oidUnknown:
		return v, nil
	case oidJSONB:
		if len(v) == 0 || v[0] != 1 {
			return nil, columnErr(fd, "jsonb of an unknown version")
		}
		return v[1:], nil
	}
	return nil, columnErr(fd, "a value of type %d is not text or bytes", fd.DataTypeOID)
}

// Text decodes a text value (as Bytes does) into a string; NULL is an
// error.
func Text(fd pgconn.FieldDescription, v []byte) (string, error) {
	if v == nil {
		return "", errNull(fd, "string")
	}
	b, err := Bytes(fd, v)
	return string(b), err
}

// Int decodes a smallint, integer or bigint; NULL is an error.
func Int(fd pgconn.FieldDescription, v []byte) (int64, error) {
	if err := checkBinary(fd); err != nil {
		return 0, err
	}
	if v == nil {
		return 0, errNull(fd, "integer")
	}
	var want int
	switch fd.DataTypeOID {
	case oidInt2:
		want = 2
	case oidInt4:
		want = 4
	case oidInt8:
		want = 8
	default:
		return 0, columnErr(fd, "a value of type %d is not an integer", fd.DataTypeOID)
	}
	if len(v) != want {
		return 0, columnErr(fd, "an integer of %d bytes, not %d", len(v), want)
	}
	switch want {
	case 2:
		return int64(int16(binary.BigEndian.Uint16(v))), nil
	case 4:
		return int64(int32(binary.BigEndian.Uint32(v))), nil
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// Float decodes a real or double precision; NULL is an error.
func Float(fd pgconn.FieldDescription, v []byte) (float64, error) {
	if err := checkBinary(fd); err != nil {
		return 0, err
	}
	switch {
	case v == nil:
		return 0, errNull(fd, "float")
	case fd.DataTypeOID == oidFloat8 && len(v) == 8:
		return math.Float64frombits(binary.BigEndian.Uint64(v)), nil
	case fd.DataTypeOID == oidFloat4 && len(v) == 4:
		return float64(math.Float32frombits(binary.BigEndian.Uint32(v))), nil
	}
	return 0, columnErr(fd, "a value of type %d and %d bytes is not a float", fd.DataTypeOID, len(v))
}

// Bool decodes a boolean; NULL is an error.
func Bool(fd pgconn.FieldDescription, v []byte) (bool, error) {
	if err := checkBinary(fd); err != nil {
		return false, err
	}
	switch {
	case v == nil:
		return false, errNull(fd, "bool")
	case fd.DataTypeOID != oidBool:
		return false, columnErr(fd, "a value of type %d is not a boolean", fd.DataTypeOID)
	case len(v) != 1 || v[0] > 1:
		return false, columnErr(fd, "a boolean of %d bytes", len(v))
	}
	return v[0] == 1, nil
}

// Time decodes a timestamptz (or a timestamp, taken as UTC) into the
// local time zone, as pgx did; NULL and ±infinity are errors.
func Time(fd pgconn.FieldDescription, v []byte) (time.Time, error) {
	if err := checkBinary(fd); err != nil {
		return time.Time{}, err
	}
	switch {
	case v == nil:
		return time.Time{}, errNull(fd, "time")
	case fd.DataTypeOID != oidTimestamptz && fd.DataTypeOID != oidTimestamp:
		return time.Time{}, columnErr(fd, "a value of type %d is not a timestamp", fd.DataTypeOID)
	case len(v) != 8:
		return time.Time{}, columnErr(fd, "a timestamp of %d bytes", len(v))
	}
	us := int64(binary.BigEndian.Uint64(v))
	if us == math.MaxInt64 || us == math.MinInt64 {
		return time.Time{}, columnErr(fd, "an infinite timestamp")
	}
	t := time.Unix(epoch.Unix()+us/1_000_000, (us%1_000_000)*1000)
	if fd.DataTypeOID == oidTimestamp {
		return t.UTC(), nil
	}
	return t, nil
}

// Interval decodes an interval into a duration, a day counting 24 hours
// and a month 30 days; NULL is an error.
func Interval(fd pgconn.FieldDescription, v []byte) (time.Duration, error) {
	if err := checkBinary(fd); err != nil {
		return 0, err
	}
	switch {
	case v == nil:
		return 0, errNull(fd, "duration")
	case fd.DataTypeOID != oidInterval:
		return 0, columnErr(fd, "a value of type %d is not an interval", fd.DataTypeOID)
	case len(v) != 16:
		return 0, columnErr(fd, "an interval of %d bytes", len(v))
	}
	us := int64(binary.BigEndian.Uint64(v))
	days := int64(int32(binary.BigEndian.Uint32(v[8:])))
	months := int64(int32(binary.BigEndian.Uint32(v[12:])))
	days += 30 * months
	return time.Duration(us)*time.Microsecond + time.Duration(days)*24*time.Hour, nil
}

// scanRow decodes row into dst, one destination a column: *string,
// *[]byte, *bool, *int, *int16, *int32, *int64, *float64, *time.Time,
// *time.Duration, and a pointer to a pointer of those that can be NULL
// (*string, *int64, *time.Time, *time.Duration: NULL sets it nil).
func scanRow(fields []pgconn.FieldDescription, row [][]byte, dst []any) error {
	if len(dst) != len(row) {
		return fmt.Errorf("%d destinations for %d columns", len(dst), len(row))
	}
	for i, d := range dst {
		if err := scanValue(fields[i], row[i], d); err != nil {
			return err
		}
	}
	return nil
}

func scanValue(fd pgconn.FieldDescription, v []byte, dst any) error {
	var err error
	switch d := dst.(type) {
	case *string:
		*d, err = Text(fd, v)
	case *[]byte:
		*d, err = Bytes(fd, v) // the row is the caller's: no copy
	case *bool:
		*d, err = Bool(fd, v)
	case *int64:
		*d, err = Int(fd, v)
	case *int:
		var n int64
		n, err = Int(fd, v)
		*d = int(n)
	case *int32:
		var n int64
		if n, err = Int(fd, v); err == nil && (n < math.MinInt32 || n > math.MaxInt32) {
			err = columnErr(fd, "%d does not fit in an int32", n)
		}
		*d = int32(n)
	case *int16:
		var n int64
		if n, err = Int(fd, v); err == nil && (n < math.MinInt16 || n > math.MaxInt16) {
			err = columnErr(fd, "%d does not fit in an int16", n)
		}
		*d = int16(n)
	case *float64:
		*d, err = Float(fd, v)
	case *time.Time:
		*d, err = Time(fd, v)
	case *time.Duration:
		*d, err = Interval(fd, v)
	case **string:
		return nullable(d, fd, v, Text)
	case **int64:
		return nullable(d, fd, v, Int)
	case **time.Time:
		return nullable(d, fd, v, Time)
	case **time.Duration:
		return nullable(d, fd, v, Interval)
	case nil:
		return nil // skipped
	default:
		return columnErr(fd, "cannot be read into a %T", dst)
	}
	return err
}

// nullable decodes v with decode into a new T that *d points to, or sets
// *d nil when v is NULL.
func nullable[T any](d **T, fd pgconn.FieldDescription, v []byte, decode func(pgconn.FieldDescription, []byte) (T, error)) error {
	if v == nil {
		*d = nil
		return checkBinary(fd)
	}
	x, err := decode(fd, v)
	*d = &x
	return err
}
