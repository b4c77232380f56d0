// Package pbbp2 encodes and decodes the frames of the Feishu (Lark) open
// platform's long connection.
package pbbp2

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Frame is one message of the long connection: the protobuf message
// pbbp2.Frame the open platform's SDKs exchange over the websocket (a
// binary websocket message each). Its schema is small and fixed, so it is
// encoded here by hand rather than with a protobuf runtime:
//
//	message Header { required string key = 1; required string value = 2; }
//	message Frame {
//	  required uint64 SeqID = 1; required uint64 LogID = 2;
//	  required int32 service = 3; required int32 method = 4;
//	  repeated Header headers = 5;
//	  optional string payload_encoding = 6; optional string payload_type = 7;
//	  optional bytes payload = 8; optional string LogIDNew = 9;
//	}
type Frame struct {
	SeqID, LogID    uint64
	Service, Method int32
	Headers         []Header
	PayloadEncoding string
	PayloadType     string
	Payload         []byte
	LogIDNew        string
}

// Header is one key and value of a Frame's headers.
type Header struct{ Key, Value string }

// Frame methods and the values of the "type" header.
const (
	// MethodControl frames carry pings and pongs.
	MethodControl int32 = 0
	// MethodData frames carry events (and card callbacks), and their
	// acknowledgements.
	MethodData int32 = 1

	TypePing  = "ping"
	TypePong  = "pong"
	TypeEvent = "event"
	TypeCard  = "card"
)

// Header returns the value of the header named key ("" when absent).
func (f *Frame) Header(key string) string {
	for _, h := range f.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return ""
}

// Marshal encodes f in protobuf's wire format.
func (f *Frame) Marshal() []byte {
	b := make([]byte, 0, 64+len(f.Payload))
	b = appendVarintField(b, 1, f.SeqID)
	b = appendVarintField(b, 2, f.LogID)
	b = appendVarintField(b, 3, uint64(int64(f.Service))) // int32 is sign-extended on the wire
	b = appendVarintField(b, 4, uint64(int64(f.Method)))
	for _, h := range f.Headers {
		var hb []byte
		hb = appendBytesField(hb, 1, []byte(h.Key))
		hb = appendBytesField(hb, 2, []byte(h.Value))
		b = appendBytesField(b, 5, hb)
	}
	if f.PayloadEncoding != "" {
		b = appendBytesField(b, 6, []byte(f.PayloadEncoding))
	}
	if f.PayloadType != "" {
		b = appendBytesField(b, 7, []byte(f.PayloadType))
	}
	if f.Payload != nil {
		b = appendBytesField(b, 8, f.Payload)
	}
	if f.LogIDNew != "" {
		b = appendBytesField(b, 9, []byte(f.LogIDNew))
	}
	return b
}

func appendVarintField(b []byte, field int, v uint64) []byte {
	b = binary.AppendUvarint(b, uint64(field)<<3)
	return binary.AppendUvarint(b, v)
}

func appendBytesField(b []byte, field int, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(field)<<3|2)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

var errTruncated = errors.New("frame truncated")

// Unmarshal decodes a Frame; fields it does not know are skipped by
// their wire type, so a field the platform adds does not break the
// connection.
func Unmarshal(b []byte) (*Frame, error) {
	f := &Frame{}
	err := fields(b, func(num int, wire int, v uint64, data []byte) error {
		switch {
		case wire == 0 && num == 1:
			f.SeqID = v
		case wire == 0 && num == 2:
			f.LogID = v
		case wire == 0 && num == 3:
			f.Service = int32(v)
		case wire == 0 && num == 4:
			f.Method = int32(v)
		case wire == 2 && num == 5:
			var h Header
			if err := fields(data, func(num, wire int, _ uint64, data []byte) error {
				if wire == 2 && num == 1 {
					h.Key = string(data)
				} else if wire == 2 && num == 2 {
					h.Value = string(data)
				}
				return nil
			}); err != nil {
				return fmt.Errorf("header: %w", err)
			}
			f.Headers = append(f.Headers, h)
		case wire == 2 && num == 6:
			f.PayloadEncoding = string(data)
		case wire == 2 && num == 7:
			f.PayloadType = string(data)
		case wire == 2 && num == 8:
			f.Payload = append([]byte(nil), data...)
		case wire == 2 && num == 9:
			f.LogIDNew = string(data)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// fields walks a protobuf message, calling fn with each field's number,
// wire type, and its varint value or its bytes.
func fields(b []byte, fn func(num, wire int, v uint64, data []byte) error) error {
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return errTruncated
		}
		b = b[n:]
		num, wire := int(key>>3), int(key&7)
		if num == 0 {
			return errors.New("frame: field number 0")
		}
		var v uint64
		var data []byte
		switch wire {
		case 0:
			v, n = binary.Uvarint(b)
			if n <= 0 {
				return errTruncated
			}
			b = b[n:]
		case 1:
			if len(b) < 8 {
				return errTruncated
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return errTruncated
			}
			b = b[4:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return errTruncated
			}
			data = b[n : n+int(l)]
			b = b[n+int(l):]
		default:
			return fmt.Errorf("frame: wire type %d not supported", wire)
		}
		if err := fn(num, wire, v, data); err != nil {
			return err
		}
	}
	return nil
}
