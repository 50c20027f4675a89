package sinkfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink"
)

// A file holds records one after another, each: key, value, topic (each a
// uvarint length and the bytes; a key or value of length 0 is empty), then
// the timestamp, partition and offset (varints).

var errTruncated = errors.New("sinkfile: truncated record")

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func encode[K, V any](ks serde.Serde[K], vs serde.Serde[V], recs []sink.Record[K, V]) ([]byte, error) {
	var b []byte
	for i, r := range recs {
		// A record the serdes refuse is the record's fault (a
		// sink.Rejected): the runtime applies the sink's error policy.
		kb, err := ks.Encode(r.Key)
		if err != nil {
			return nil, &sink.RejectedError{Index: i, Message: "key: " + err.Error(), Err: fmt.Errorf("sinkfile: key: %w", err)}
		}
		vb, err := vs.Encode(r.Value)
		if err != nil {
			return nil, &sink.RejectedError{Index: i, Message: "value: " + err.Error(), Err: fmt.Errorf("sinkfile: value: %w", err)}
		}
		b = appendBytes(b, kb)
		b = appendBytes(b, vb)
		b = appendBytes(b, []byte(r.Topic))
		b = binary.AppendVarint(b, r.Timestamp)
		b = binary.AppendVarint(b, int64(r.Partition))
		b = binary.AppendVarint(b, r.Offset)
	}
	return b, nil
}

func readBytes(b []byte) ([]byte, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, nil, errTruncated
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

func readVarint(b []byte) (int64, []byte, error) {
	v, k := binary.Varint(b)
	if k <= 0 {
		return 0, nil, errTruncated
	}
	return v, b[k:], nil
}

func decode[K, V any](ks serde.Serde[K], vs serde.Serde[V], b []byte) ([]sink.Record[K, V], error) {
	var out []sink.Record[K, V]
	for len(b) > 0 {
		var kb, vb, tb []byte
		var ts, p, off int64
		var err error
		if kb, b, err = readBytes(b); err == nil {
			if vb, b, err = readBytes(b); err == nil {
				if tb, b, err = readBytes(b); err == nil {
					if ts, b, err = readVarint(b); err == nil {
						if p, b, err = readVarint(b); err == nil {
							off, b, err = readVarint(b)
						}
					}
				}
			}
		}
		if err != nil {
			return nil, err
		}
		k, err := ks.Decode(kb)
		if err != nil {
			return nil, fmt.Errorf("sinkfile: key: %w", err)
		}
		v, err := vs.Decode(vb)
		if err != nil {
			return nil, fmt.Errorf("sinkfile: value: %w", err)
		}
		out = append(out, sink.Record[K, V]{Key: k, Value: v, Timestamp: ts, Topic: string(tb), Partition: int32(p), Offset: off})
	}
	return out, nil
}

// writeFile writes b to path through a temporary file in tmp, fsynced
// before the rename and the directory after it, so that path exists whole
// or not at all after a crash.
func writeFile(tmp, path string, b []byte) error {
	f, err := os.CreateTemp(tmp, filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	name := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// validName accepts what sink.MaxXIDLength describes, and sink and topic
// names (the characters of a Kafka topic): nothing that could leave the
// directory.
func validName(s string, max int) error {
	if s == "" || len(s) > max || s == "." || s == ".." {
		return fmt.Errorf("sinkfile: invalid name %q", s)
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) >= 0 {
		return fmt.Errorf("sinkfile: invalid name %q", s)
	}
	return nil
}
