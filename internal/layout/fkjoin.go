package layout

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/sluice-streams/sluice/serde"
)

// Foreign-key join layout: the right side's subscription store, and the
// two records the sides send each other through repartition topics.
//
// The subscription store (<name>-subscriptions), one entry per left row
// subscribed to a foreign key:
//
//	uvarint(len(fk)) fk leftKey → hash (8 bytes big-endian)
//
// fk is the foreign key's encoding, leftKey the left row's, hash the hash
// of the left value it subscribed with. A foreign key's subscribers are one
// range scan (SubscriptionPrefix, PrefixEnd).
//
// A subscription (left → right, keyed by the foreign key), on the topic
// <name>-subscription-repartition:
//
//	add uvarint(len(leftKey)) leftKey hash
//
// add is 1 to subscribe, 0 to unsubscribe (hash 0). A response (right →
// left, keyed by the left key), on <name>-response-repartition:
//
//	hash 0                 no right row
//	hash 1 rightValue      the right row
//
// hash is the subscribed hash, 8 bytes big-endian; rightValue is the right
// row's value in the right table's value serde.

// SubscriptionPrefix is the prefix of the subscription store entries of the
// foreign key whose encoding is fkb.
func SubscriptionPrefix(fkb []byte) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(fkb))), fkb...)
}

// SubscriptionKey is the subscription store key of the left key kb
// subscribed to the foreign key whose prefix is pre (SubscriptionPrefix).
func SubscriptionKey(pre, kb []byte) []byte {
	return append(append([]byte(nil), pre...), kb...)
}

// SubscriptionHash is the value of a subscription store entry.
func SubscriptionHash(h uint64) []byte { return binary.BigEndian.AppendUint64(nil, h) }

// ReadSubscriptionHash reads a subscription store entry's value.
func ReadSubscriptionHash(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// AppendSubscription appends a subscription record: subscribe (or, !add,
// unsubscribe) the left key kb whose value has hash h.
func AppendSubscription(b []byte, add bool, kb []byte, h uint64) []byte {
	flag := byte(0)
	if add {
		flag = 1
	}
	b = append(b, flag)
	b = binary.AppendUvarint(b, uint64(len(kb)))
	b = append(b, kb...)
	return binary.BigEndian.AppendUint64(b, h)
}

// ParseSubscription reads a subscription record; kb is a copy, non-nil
// even when empty (a nil key is no key, and is partitioned as none).
func ParseSubscription(b []byte) (add bool, kb []byte, h uint64, err error) {
	if len(b) < 1 {
		return false, nil, 0, fmt.Errorf("%w: subscription", serde.ErrDecode)
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || uint64(len(b)) != 1+uint64(w)+n+8 {
		return false, nil, 0, fmt.Errorf("%w: subscription of %d bytes", serde.ErrDecode, len(b))
	}
	kb = bytes.Clone(b[1+w : 1+w+int(n)]) // an empty key stays non-nil: nil is no key
	return b[0] == 1, kb, binary.BigEndian.Uint64(b[len(b)-8:]), nil
}

// AppendResponse appends a response record: the right row's value vb
// (nil: no row) for the left value with hash h.
func AppendResponse(b []byte, h uint64, vb []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, h)
	if vb == nil {
		return append(b, 0)
	}
	return append(append(b, 1), vb...)
}

// ParseResponse reads a response record; vb is a copy, nil if there is no
// right row.
func ParseResponse(b []byte) (h uint64, vb []byte, err error) {
	if len(b) < 9 || b[8] > 1 {
		return 0, nil, fmt.Errorf("%w: response of %d bytes", serde.ErrDecode, len(b))
	}
	if b[8] == 1 {
		vb = append([]byte{}, b[9:]...)
	}
	return binary.BigEndian.Uint64(b), vb, nil
}
