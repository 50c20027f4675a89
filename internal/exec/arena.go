package exec

import "unsafe"

// arenaChunk is the size of the chunks an Arena carves slices from: large
// enough that a commit's output shares a few dozen allocations, small enough
// that a chunk pinned by one slow record wastes little.
const arenaChunk = 64 << 10

// Arena hands out the key and value bytes of the records a task produces,
// carved from shared chunks: one allocation per chunk instead of one per key
// and value. A chunk is freed by the collector once no record holds a slice
// of it. Slices handed out are never written again. An Arena belongs to one
// task and is not safe for concurrent use.
type Arena struct{ buf []byte }

// Append encodes into the arena: fn appends to the slice it is given and
// returns the result, which Append returns capped, so that no append by its
// holder can reach the next slice. If fn's output outgrew the chunk, append
// moved it to memory of its own, which is returned as it is.
func (a *Arena) Append(fn func(dst []byte) ([]byte, error)) ([]byte, error) {
	if cap(a.buf)-len(a.buf) < 256 {
		a.buf = make([]byte, 0, arenaChunk)
	}
	free := a.buf[len(a.buf):]
	out, err := fn(free)
	if err != nil || len(out) == 0 {
		return out, err
	}
	if unsafe.SliceData(out) != unsafe.SliceData(free) {
		return out, nil
	}
	a.buf = a.buf[:len(a.buf)+len(out)]
	return out[:len(out):len(out)], nil
}
