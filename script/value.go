package script

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"

	rt "github.com/arnodel/golua/runtime"
)

// maxDepth bounds the nesting of values crossing between Go and Lua.
const maxDepth = 200

// toLua converts a Go value, as decoded from JSON or YAML, to Lua:
//   - nil, bool and string as themselves;
//   - Go integers (int, int64, uint8, ...) as Lua integers;
//   - json.Number as an integer when its text is an integer ("5"), else a
//     float ("5.0", "1e3");
//   - float64 and float32 as an integer when the value is integral and
//     exactly representable (|v| <= 2^53), else a float. encoding/json
//     decodes the integer 5 as float64(5), and a tool's parameters are
//     integers far more often than integral floats; decode with
//     UseNumber to keep 5.0 a float;
//   - maps as tables with their keys as strings, slices and arrays as
//     sequences 1..n;
//   - anything else as its fmt.Sprint text.
func toLua(v any, depth int) (rt.Value, error) {
	if depth > maxDepth {
		return rt.NilValue, errors.New("value nested too deeply")
	}
	switch x := v.(type) {
	case nil:
		return rt.NilValue, nil
	case bool:
		return rt.BoolValue(x), nil
	case string:
		return rt.StringValue(x), nil
	case int:
		return rt.IntValue(int64(x)), nil
	case int64:
		return rt.IntValue(x), nil
	case int32:
		return rt.IntValue(int64(x)), nil
	case float64:
		return floatToLua(x), nil
	case float32:
		return floatToLua(float64(x)), nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return rt.IntValue(i), nil
		}
		f, err := x.Float64()
		if err != nil {
			return rt.StringValue(string(x)), nil
		}
		return rt.FloatValue(f), nil
	case map[string]any:
		t := rt.NewTable()
		for k, e := range x {
			lv, err := toLua(e, depth+1)
			if err != nil {
				return rt.NilValue, err
			}
			t.Set(rt.StringValue(k), lv)
		}
		return rt.TableValue(t), nil
	case []any:
		t := rt.NewTable()
		for i, e := range x {
			lv, err := toLua(e, depth+1)
			if err != nil {
				return rt.NilValue, err
			}
			t.Set(rt.IntValue(int64(i+1)), lv)
		}
		return rt.TableValue(t), nil
	case []byte:
		return rt.StringValue(string(x)), nil
	case error:
		return rt.StringValue(x.Error()), nil
	}
	return reflectToLua(reflect.ValueOf(v), depth)
}

func floatToLua(f float64) rt.Value {
	if f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
		return rt.IntValue(int64(f))
	}
	return rt.FloatValue(f)
}

func reflectToLua(v reflect.Value, depth int) (rt.Value, error) {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rt.IntValue(v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := v.Uint()
		if u > math.MaxInt64 {
			return rt.FloatValue(float64(u)), nil
		}
		return rt.IntValue(int64(u)), nil
	case reflect.Float32, reflect.Float64:
		return floatToLua(v.Float()), nil
	case reflect.String:
		return rt.StringValue(v.String()), nil
	case reflect.Bool:
		return rt.BoolValue(v.Bool()), nil
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return rt.NilValue, nil
		}
		return toLua(v.Elem().Interface(), depth+1)
	case reflect.Map:
		if v.IsNil() {
			return rt.NilValue, nil
		}
		t := rt.NewTable()
		it := v.MapRange()
		for it.Next() {
			lv, err := toLua(it.Value().Interface(), depth+1)
			if err != nil {
				return rt.NilValue, err
			}
			t.Set(rt.StringValue(fmt.Sprint(it.Key().Interface())), lv)
		}
		return rt.TableValue(t), nil
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return rt.NilValue, nil
		}
		t := rt.NewTable()
		for i := 0; i < v.Len(); i++ {
			lv, err := toLua(v.Index(i).Interface(), depth+1)
			if err != nil {
				return rt.NilValue, err
			}
			t.Set(rt.IntValue(int64(i+1)), lv)
		}
		return rt.TableValue(t), nil
	case reflect.Invalid:
		return rt.NilValue, nil
	}
	if v.CanInterface() {
		return rt.StringValue(fmt.Sprint(v.Interface())), nil
	}
	return rt.NilValue, nil
}

// fromLua converts a script's result to Go: nil, bool, int64, float64 and
// string as themselves, except the floats JSON cannot hold: NaN, +Inf and
// -Inf become the strings "nan", "inf" and "-inf" (what Lua 5.4 prints
// for them), wherever they are; a table whose keys are exactly 1..n (n >= 1) as
// []any, any other table (the empty one included) as map[string]any with
// keys as text (integers as "3", floats as Lua writes them, booleans as
// "true"); functions, coroutines and userdata as their type name. A
// table that contains itself is an error, and so is a result whose copy
// would take more than budget bytes: a table reached by several paths is
// copied for each, so a few shared tables can stand for billions of
// values, and the copy runs outside the script's limits.
func fromLua(v rt.Value, budget uint64) (any, error) {
	c := &converter{seen: map[*rt.Table]bool{}, budget: budget}
	return c.fromLua(v, 0)
}

type converter struct {
	seen   map[*rt.Table]bool
	budget uint64
}

// valueCost is what one converted value is charged besides its text.
const valueCost = 16

func (c *converter) spend(n int) error {
	cost := uint64(valueCost + n)
	if cost > c.budget {
		return errTooLarge
	}
	c.budget -= cost
	return nil
}

var errTooLarge = errors.New("the result is too large (a table reached by several paths is copied for each); return plain data")

func (c *converter) fromLua(v rt.Value, depth int) (any, error) {
	if err := c.spend(0); err != nil {
		return nil, err
	}
	switch v.Type() {
	case rt.NilType:
		return nil, nil
	case rt.BoolType:
		return v.AsBool(), nil
	case rt.IntType:
		return v.AsInt(), nil
	case rt.FloatType:
		return floatFromLua(v.AsFloat()), nil
	case rt.StringType:
		s := v.AsString()
		if err := c.spend(len(s)); err != nil {
			return nil, err
		}
		return s, nil
	case rt.TableType:
	default:
		return v.TypeName(), nil
	}
	t := v.AsTable()
	seen := c.seen
	if seen[t] {
		return nil, errors.New("the result is a table that contains itself; return plain data")
	}
	if depth > maxDepth {
		return nil, errors.New("the result is nested too deeply")
	}
	seen[t] = true
	defer delete(seen, t)

	type kv struct {
		k rt.Value
		v rt.Value
	}
	var entries []kv
	maxInt, ints := int64(0), true
	k, val, ok := t.Next(rt.NilValue)
	for ok && !k.IsNil() {
		entries = append(entries, kv{k, val})
		if i, isInt := k.TryInt(); isInt && k.Type() == rt.IntType && i >= 1 {
			maxInt = max(maxInt, i)
		} else {
			ints = false
		}
		k, val, ok = t.Next(k)
	}
	if ints && len(entries) > 0 && maxInt == int64(len(entries)) {
		out := make([]any, len(entries))
		for _, e := range entries {
			g, err := c.fromLua(e.v, depth+1)
			if err != nil {
				return nil, err
			}
			out[e.k.AsInt()-1] = g
		}
		return out, nil
	}
	out := make(map[string]any, len(entries))
	for _, e := range entries {
		g, err := c.fromLua(e.v, depth+1)
		if err != nil {
			return nil, err
		}
		key := keyText(e.k)
		if err := c.spend(len(key)); err != nil {
			return nil, err
		}
		out[key] = g
	}
	return out, nil
}

// floatFromLua is f, or its text when JSON has no number for it.
func floatFromLua(f float64) any {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return f
}

func keyText(k rt.Value) string {
	switch k.Type() {
	case rt.StringType:
		return k.AsString()
	case rt.BoolType:
		return strconv.FormatBool(k.AsBool())
	case rt.IntType:
		return strconv.FormatInt(k.AsInt(), 10)
	case rt.FloatType:
		if s, ok := floatFromLua(k.AsFloat()).(string); ok {
			return s
		}
		s, _ := k.ToString()
		return s
	default:
		return k.TypeName()
	}
}
