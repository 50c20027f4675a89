package keyhash

import (
	"fmt"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

// murmur2 is Kafka's Utils.murmur2, written out from the Java source as an
// independent reference: the test checks it against Kafka's own test
// vectors, then checks Partition against it.
func murmur2(data []byte) int32 {
	const (
		seed = int32(-1756908916) // 0x9747b28c
		m    = int32(0x5bd1e995)
	)
	length := int32(len(data))
	h := seed ^ length
	for i := 0; i+4 <= len(data); i += 4 {
		k := int32(data[i]) | int32(data[i+1])<<8 | int32(data[i+2])<<16 | int32(data[i+3])<<24
		k *= m
		k ^= int32(uint32(k) >> 24)
		k *= m
		h *= m
		h ^= k
	}
	tail := data[len(data)&^3:]
	switch len(tail) {
	case 3:
		h ^= int32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= int32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= int32(tail[0])
		h *= m
	}
	h ^= int32(uint32(h) >> 13)
	h *= m
	h ^= int32(uint32(h) >> 15)
	return h
}

// kafkaPartition is Kafka's default partitioner for a keyed record
// (BuiltInPartitioner.partitionForKey): toPositive(murmur2) % n.
func kafkaPartition(kb []byte, n int32) int32 { return (murmur2(kb) & 0x7fffffff) % n }

// TestMurmur2Vectors pins the reference to Kafka's UtilsTest.testMurmur2.
func TestMurmur2Vectors(t *testing.T) {
	for in, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		if got := murmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, Kafka's test says %d", in, got, want)
		}
	}
}

// adversarial is every key length, raw bytes included, and UUIDs.
func adversarial() [][]byte {
	ks := testkeys.Bytes()
	for _, s := range testkeys.All() {
		ks = append(ks, []byte(s))
	}
	return ks
}

var counts = []int32{1, 2, 3, 4, 8, 12, 16, 100}

func TestPartitionIsKafkas(t *testing.T) {
	for _, kb := range adversarial() {
		for _, n := range counts {
			if got, want := Partition(kb, n), kafkaPartition(kb, n); got != want {
				t.Fatalf("key %x among %d: partition %d, Kafka's %d", kb, n, got, want)
			}
		}
	}
	if Partition(nil, 12) != Partition([]byte{}, 12) {
		t.Fatal("a nil key is not the empty key")
	}
}

// TestReferenceCatchesWrongHash is the negative control: a partitioner off
// by its seed, or one that clears the high bit after the modulo instead
// of before, disagrees with the reference on these keys.
func TestReferenceCatchesWrongHash(t *testing.T) {
	wrong := map[string]func([]byte, int32) int32{
		"seed+1": func(kb []byte, n int32) int32 {
			return (murmur2(append([]byte{0}, kb...)) & 0x7fffffff) % n
		},
		"abs": func(kb []byte, n int32) int32 {
			h := murmur2(kb) % n
			if h < 0 {
				h = -h
			}
			return h
		},
	}
	for name, fn := range wrong {
		caught := false
		for _, kb := range adversarial() {
			if fn(kb, 16) != kafkaPartition(kb, 16) {
				caught = true
				break
			}
		}
		if !caught {
			t.Errorf("the %s partitioner agrees with Kafka's on every key", name)
		}
	}
}

func ExamplePartition() {
	fmt.Println(Partition([]byte("foobar"), 16))
	// Output: 14
}
