package serde

import (
	"errors"
	"testing"
)

func roundTrip[T comparable](t *testing.T, s Serde[T], v T) {
	t.Helper()
	b, err := s.Encode(v)
	if err != nil {
		t.Fatalf("encode %v: %v", v, err)
	}
	got, err := s.Decode(b)
	if err != nil {
		t.Fatalf("decode %v: %v", v, err)
	}
	if got != v {
		t.Fatalf("round trip: got %v, want %v", got, v)
	}
	// AppendEncode appends exactly what Encode returns, after what dst
	// held, through an Appender or not.
	a, err := AppendEncode(s, []byte("prefix"), v)
	if err != nil || string(a) != "prefix"+string(b) {
		t.Fatalf("AppendEncode(%v) = %q, %v; want %q", v, a, err, "prefix"+string(b))
	}
}

func TestRoundTrips(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 1 << 62, -1 << 63} {
		roundTrip(t, Int64, v)
		roundTrip(t, Int64Text, v)
	}
	for _, v := range []string{"", "hello", "grüße", "日本"} {
		roundTrip(t, String, v)
	}
	type bill struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	}
	roundTrip(t, JSON[bill](), bill{"b1", 42})
}

func TestInt64BigEndian(t *testing.T) {
	b, _ := Int64.Encode(258)
	if want := []byte{0, 0, 0, 0, 0, 0, 1, 2}; string(b) != string(want) {
		t.Fatalf("got %v, want %v", b, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
	}{
		{"int64 short", func() error { _, err := Int64.Decode([]byte{1, 2}); return err }()},
		{"int64 text", func() error { _, err := Int64Text.Decode([]byte("12x")); return err }()},
		{"string utf8", func() error { _, err := String.Decode([]byte{0xff, 0xfe}); return err }()},
		{"json", func() error { _, err := JSON[map[string]int]().Decode([]byte("{")); return err }()},
	}
	for _, c := range cases {
		if !errors.Is(c.err, ErrDecode) {
			t.Errorf("%s: got %v, want an error wrapping ErrDecode", c.name, c.err)
		}
	}
	if _, err := AppendEncode(String, nil, "\xff"); !errors.Is(err, ErrEncode) {
		t.Errorf("AppendEncode of invalid UTF-8: got %v, want an error wrapping ErrEncode", err)
	}
	if _, err := String.Encode("\xff"); !errors.Is(err, ErrEncode) {
		t.Errorf("string encode of invalid UTF-8: got %v, want ErrEncode", err)
	}
}

func FuzzInt64Text(f *testing.F) {
	f.Add([]byte("42"))
	f.Add([]byte("-9223372036854775808"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Int64Text.Decode(b)
		if err != nil {
			return
		}
		enc, _ := Int64Text.Encode(n)
		if back, err := Int64Text.Decode(enc); err != nil || back != n {
			t.Fatalf("re-decode of %q: %v %v", enc, back, err)
		}
	})
}

func FuzzInt64(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Int64.Decode(b)
		if err != nil {
			if len(b) == 8 {
				t.Fatalf("8 bytes rejected: %v", err)
			}
			return
		}
		enc, _ := Int64.Encode(n)
		if string(enc) != string(b) {
			t.Fatalf("re-encode: %v != %v", enc, b)
		}
	})
}

func FuzzString(f *testing.F) {
	f.Add([]byte("hello"))
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := String.Decode(b)
		if err != nil {
			return
		}
		enc, err := String.Encode(s)
		if err != nil || string(enc) != string(b) {
			t.Fatalf("re-encode of %q: %q %v", b, enc, err)
		}
	})
}

func FuzzJSON(f *testing.F) {
	type bill struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	}
	f.Add([]byte(`{"id":"x","amount":1}`))
	f.Add([]byte(`{"id":`))
	s := JSON[bill]()
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := s.Decode(b)
		if err != nil {
			return
		}
		enc, err := s.Encode(v)
		if err != nil {
			t.Fatalf("encode of decoded %+v: %v", v, err)
		}
		if back, err := s.Decode(enc); err != nil || back != v {
			t.Fatalf("re-decode: %+v %v", back, err)
		}
	})
}

func BenchmarkInt64TextEncode(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, _ = Int64Text.Encode(int64(i))
	}
}

func BenchmarkJSONDecode(b *testing.B) {
	type bill struct {
		ID     string `json:"bill_id"`
		Amount int64  `json:"amount_cents"`
	}
	s := JSON[bill]()
	in := []byte(`{"bill_id":"b-123","amount_cents":4200}`)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = s.Decode(in)
	}
}
