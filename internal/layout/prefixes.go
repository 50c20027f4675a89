package layout

// StoreKind names a store layout: what a store of that kind holds and how
// its keys begin. Several layouts may share prefix bytes, since each store
// holds one kind; within one store the prefixes must differ.
type StoreKind string

const (
	// KindKV is a key-value store (kv.go): no prefix.
	KindKV StoreKind = "key-value"
	// KindWindow is a window or session store (window.go, elements.go).
	KindWindow StoreKind = "window"
	// KindSliding is a sliding-window store (sliding.go): window.go's
	// windows beside the kept records.
	KindSliding StoreKind = "sliding"
	// KindJoin is one side's buffer of a stream–stream join (join.go).
	KindJoin StoreKind = "stream-join buffer"
	// KindState is a keyed state of the Processor API (state.go).
	KindState StoreKind = "keyed state"
	// KindTimers is the Processor API's timers (timers.go).
	KindTimers StoreKind = "timers"
	// KindSubscriptions is a foreign-key join's subscription store
	// (fkjoin.go): no prefix.
	KindSubscriptions StoreKind = "fk subscriptions"
	// KindTime is the time store <repartition topic>-time of a
	// sub-topology that writes repartition topics and has no windowed
	// store (time.go): only the time state.
	KindTime StoreKind = "time"
)

// Prefix is one entry of the table of prefixes: a key of a store of Kind
// that begins with Byte, drawn as Key, holds Value.
type Prefix struct {
	Kind  StoreKind
	Byte  byte
	Key   string
	Value string
}

// TimeStateKinds are the store kinds that can be a sub-topology's time
// store (the windowed stores and KindTime): they hold TimeStateKey beside
// their own keys, so none of their prefixes may be its first byte.
var TimeStateKinds = []StoreKind{KindWindow, KindSliding, KindJoin, KindTimers, KindTime}

// Prefixes is the table of every prefix byte of every store layout, the
// one DESIGN.md shows (a test keeps the two equal). Times are AppendTime's
// 8 bytes; "<d-suffix>" is a window key without its first byte.
var Prefixes = []Prefix{
	{KindWindow, WindowData, "d uvarint(len(key)) key start", "the window's state (WindowValue), then its aggregate"},
	{KindWindow, WindowFire, "f at <d-suffix>", "IndexValue: the window's event-time trigger timer"},
	{KindWindow, WindowProc, "p at <d-suffix>", "IndexValue: the window's processing-time trigger timer"},
	{KindWindow, WindowExpire, "x at <d-suffix>", "IndexValue: remove the window when the watermark reaches at"},
	{KindWindow, WindowElement, "e <d-suffix> seq", "an element of a window that keeps its records (ProcessWindows, count windows)"},
	{KindWindow, WindowByStart, "w start uvarint(len(key)) key", "the window's state, in a store laid out by start (fixed-size windows with an aggregate): no x entries"},
	{KindWindow, WindowFireByStart, "g at <w-suffix>", "IndexValue: the event-time trigger timer of a window laid out by start"},
	{KindWindow, WindowProcByStart, "q at <w-suffix>", "IndexValue: the processing-time trigger timer of a window laid out by start"},
	{KindWindow, TimeStateKey[0], "T", "the sub-topology's time state (time.go), in its first windowed store"},
	{KindSliding, WindowData, "d uvarint(len(key)) key start", "the window's state, as in a window store"},
	{KindSliding, WindowFire, "f at <d-suffix>", "IndexValue: emit the window at End-1 (default emit)"},
	{KindSliding, WindowExpire, "x at <d-suffix>", "IndexValue: remove the window (EmitFinal: emit it first) at its close"},
	{KindSliding, SlidingRecord, "r uvarint(len(key)) key ts seq", "a kept record's value, in the stream's value serde"},
	{KindSliding, SlidingRecordExpire, "y at <r-suffix>", "IndexValue: delete the record when the watermark reaches at"},
	{KindSliding, TimeStateKey[0], "T", "the time state, when this is the first windowed store"},
	{KindJoin, JoinRecord, "j seg uvarint(len(key)) key ts seq", "flags (JoinJoined), then the record's value; seg is the start of ts's segment"},
	{KindJoin, WindowExpire, "x at uvarint(len(key)) key ts seq", "IndexValue: an outer side's record: remove it (emit it unjoined) at the watermark"},
	{KindJoin, WindowData, "d uvarint(len(key)) key ts seq", "a record of the layout before segments, moved to j when the join first reads the store"},
	{KindJoin, TimeStateKey[0], "T", "the time state, when this is the first windowed store"},
	{KindState, StateClock, "c", "the state's clock (ClockFormat): the largest time a write saw"},
	{KindState, StateValue, "v key", "a value, reducing or aggregating state's entry (EntryPlain or EntryTimed)"},
	{KindState, StateList, "l key", "a list state's elements (ListFormat)"},
	{KindState, StateMap, "m uvarint(len(key)) key userKey", "a map state's entry (EntryPlain or EntryTimed)"},
	{KindTimers, TimerEvent, "e at key", "IndexValue: an event-time timer"},
	{KindTimers, TimerProcessing, "p at key", "IndexValue: a processing-time timer"},
	{KindTimers, TimeStateKey[0], "T", "the time state, when this is the first windowed store"},
	{KindTime, TimeStateKey[0], "T", "the time state: version, stream time, the watermark tracker's state"},
}

// Unprefixed are the layouts whose keys have no prefix byte: their stores
// hold one kind of key only, and are never a time store.
var Unprefixed = []Prefix{
	{Kind: KindKV, Key: "serde(key)", Value: "serde(value)"},
	{Kind: KindSubscriptions, Key: "uvarint(len(fk)) fk leftKey", Value: "the subscribed left value's hash, 8 bytes"},
}
