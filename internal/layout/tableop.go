package layout

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-streams/sluice/serde"
)

// Table operation layout: the value of a record GroupTableBy sends through
// its repartition topic to the group a row leaves or joins. A flag byte,
// then the values' encodings:
//
//	0 serde(old)                          subtract old from the group
//	1 serde(new)                          add new to the group
//	2 uvarint(len(serde(old))) serde(old) serde(new)
//	                                      both: the row stays in the group
//
// Flag 2 makes a row that stays in its group one update of the group's
// aggregate (Kafka Streams' KIP-904); flags 0 and 1 are what a row that
// moves sends, and all that was written before flag 2 existed.
const (
	TableOpSub  byte = 0
	TableOpAdd  byte = 1
	TableOpBoth byte = 2
)

// AppendTableOpHead appends the flag byte and, for TableOpBoth, the length
// of old's encoding: what goes before the values' encodings.
func AppendTableOpHead(dst []byte, flag byte, oldLen int) []byte {
	dst = append(dst, flag)
	if flag == TableOpBoth {
		dst = binary.AppendUvarint(dst, uint64(oldLen))
	}
	return dst
}

// ParseTableOp splits a table operation into its flag and the encodings of
// the values it carries (nil: not carried).
func ParseTableOp(b []byte) (flag byte, old, new []byte, err error) {
	if len(b) == 0 || b[0] > TableOpBoth {
		return 0, nil, nil, fmt.Errorf("%w: table operation", serde.ErrDecode)
	}
	switch b[0] {
	case TableOpSub:
		return TableOpSub, b[1:], nil, nil
	case TableOpAdd:
		return TableOpAdd, nil, b[1:], nil
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || n > uint64(len(b)-1-w) {
		return 0, nil, nil, fmt.Errorf("%w: table operation of %d bytes", serde.ErrDecode, len(b))
	}
	rest := b[1+w:]
	return TableOpBoth, rest[:n], rest[n:], nil
}
