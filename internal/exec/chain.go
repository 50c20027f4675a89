package exec

// Typed is a node's part in a typed chain: a run of nodes whose functions
// the DSL made at build time, which a task links once, at Init, into one
// function from a source's bytes to a sink's bytes. Along the chain keys and
// values keep their types: they are never boxed in an `any` nor carried in
// a Record, and no Processor or Context is called in between. This is
// Flink's operator chaining taken one step further than the erased path,
// which Processors still take wherever a chain cannot reach (most stateful
// operators, a node with several parents, a record from an erased parent,
// a record that may be a tombstone). Aggregations take part: their entry
// reads and writes the store through the node's Processor, and their
// output is a chain of ChangeOf values.
//
// An entry is a func(k K, v V) error for the node's input types, held as
// any: a source's takes the raw key and value ([]byte). Links assert the
// entry they are given and return nil if it is not of the type they pass on,
// so that a mismatch falls back to the erased path instead of panicking.
type Typed struct {
	// Link (sources and processors) returns the node's entry, given the
	// entry its output goes to, and for a processor the node's Processor
	// in the task (nil for a source), whose state the entry may use and
	// which may keep next for output of its own (a folding node's held
	// updates, Unfolder). Before the entry runs user code, a store or a
	// serde it sets f.Node and f.Class, so that an error or panic is
	// blamed where it arose. nil: the node takes no typed input.
	Link func(f *Frame, p Processor, next any) any
	// Out (sources and processors) returns an entry for the node's output
	// that boxes the key and value and hands them to receive, an erased
	// child's: how a chain ends in erased nodes.
	Out func(f *Frame, receive func(Record) error) any
	// Fan (sources and processors) returns an entry for the node's output
	// that calls the entries of its children in order, as the erased path
	// forwards, until one fails.
	Fan func(children []any) any
	// Sink (sinks) returns the node's entry: it encodes into a and passes
	// the bytes to send.
	Sink func(f *Frame, a *Arena, send func(key, value []byte) error) any
	// Emits (processors) says that the node sends output of its own
	// through the next that Link gave it, not only from its entry (a
	// window's results, whichever path brought the records): the task
	// links such a node whether or not a chain reaches it.
	Emits bool
}

// Frame is what a typed chain knows of the record it runs: what the erased
// path carries in a Record next to the key and value, and where it is. A
// task has one, reused for every record.
type Frame struct {
	Timestamp int64
	Headers   []Header
	// Node and Class name the node running and what an error there is.
	Node  *Node
	Class ErrorClass
}

// ChainOut is Typed.Out for a node whose output has types K and V.
func ChainOut[K, V any](f *Frame, receive func(Record) error) any {
	return func(k K, v V) error {
		return receive(Record{Key: k, Value: v, Timestamp: f.Timestamp, Headers: f.Headers})
	}
}

// ChainFan is Typed.Fan for a node whose output has types K and V; nil if
// a child's entry takes other types.
func ChainFan[K, V any](children []any) any {
	entries := make([]func(K, V) error, len(children))
	for i, c := range children {
		e, ok := c.(func(K, V) error)
		if !ok {
			return nil
		}
		entries[i] = e
	}
	return func(k K, v V) error {
		for _, e := range entries {
			if err := e(k, v); err != nil {
				return err
			}
		}
		return nil
	}
}

// At says that node n runs, and what an error there is.
func (f *Frame) At(n *Node, c ErrorClass) { f.Node, f.Class = n, c }
