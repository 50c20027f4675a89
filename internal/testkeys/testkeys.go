package testkeys

import (
	"fmt"
	"unicode/utf8"
)

// MaxLen is the longest key All returns, in bytes: past 128, where a
// uvarint length prefix takes two bytes.
const MaxLen = 140

// runes are the characters Len builds keys from, of 1 to 4 bytes in UTF-8:
// control and high ASCII, the edges of each encoded length, and a
// character that is not in the Basic Multilingual Plane.
var runes = []rune{'k', 0, '~', 0x7f, '/', 'Z', 0x80, 0xe9, 0x7ff, 0x800, 0x20ac, 0xfffd, 0x10000, 0x1f600, 0x10ffff}

// Len returns a key of exactly n bytes, valid UTF-8, whose characters mix
// 1- to 4-byte encodings. Keys of different n differ; keys of one n from
// different seeds differ too when n > 0.
func Len(n int, seed uint64) string {
	if n <= 0 {
		return ""
	}
	// The first byte tells seeds apart, so keys of one length differ.
	b := append(make([]byte, 0, n), byte('A'+seed%26))
	x := seed*0x9e3779b97f4a7c15 + uint64(n)*0xbf58476d1ce4e5b9 + 1
	for len(b) < n {
		x ^= x >> 30
		x *= 0x94d049bb133111eb
		x ^= x >> 27
		r := runes[x%uint64(len(runes))]
		if utf8.RuneLen(r) > n-len(b) {
			r = rune('a' + x%26) // fill the last bytes with ASCII
		}
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}

// Lengths returns one key of every length 0..MaxLen, in length order.
func Lengths() []string {
	keys := make([]string, 0, MaxLen+1)
	for n := 0; n <= MaxLen; n++ {
		keys = append(keys, Len(n, 0))
	}
	return keys
}

// UUIDs returns n UUID strings (36 bytes, version 4 layout), distinct and
// deterministic.
func UUIDs(n int) []string {
	out := make([]string, n)
	x := uint64(0x243f6a8885a308d3)
	next := func() uint64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	for i := range out {
		hi, lo := next(), next()
		out[i] = fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x",
			hi>>32, (hi>>16)&0xffff, hi&0xfff, 0x8000|lo>>48&0x3fff, lo&0xffffffffffff)
	}
	return out
}

// All returns the keys tests should run with: one of every length
// 0..MaxLen (Lengths) and eight UUIDs, all distinct.
func All() []string {
	return append(Lengths(), UUIDs(8)...)
}

// Bytes returns keys of every length 0..MaxLen as raw bytes, not
// necessarily UTF-8 (0x00 and 0xff included), for byte-keyed stores; the
// empty key is non-nil.
func Bytes() [][]byte {
	keys := make([][]byte, 0, MaxLen+1)
	for n := 0; n <= MaxLen; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte((i*131 + n*7) ^ (i >> 1))
		}
		if n > 0 {
			b[n-1] = 0xff
		}
		keys = append(keys, b)
	}
	return keys
}
