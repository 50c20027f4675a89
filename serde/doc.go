// Package serde turns typed keys and values into bytes and back.
//
// A Serde[T] is just Encode and Decode. sluice runs serdes only at the edges
// of a sub-topology: sources decode, sinks and stores encode; fused operators
// hand typed values to each other directly. Decoding never panics: bad bytes
// come back as an error wrapping ErrDecode, which the runtime routes to a
// dead-letter topic or treats as fatal.
//
//	var s serde.Serde[int64] = serde.Int64
//	b, _ := s.Encode(42)
//	n, err := s.Decode(b) // 42, nil
package serde
