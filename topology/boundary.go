package topology

import (
	"unsafe"

	"github.com/sluice-streams/sluice/internal/exec"
)

// topology's API declares its own types for what users see of the runtime
// (errors, actions, headers, punctuation clocks) instead of showing exec's;
// they convert here, where a value crosses to exec or back. The runtimes
// that need what a Built or a handler holds reach it through exec's hooks,
// set below.

func init() {
	exec.BuiltPlan = func(built any) *exec.Plan {
		if b, ok := built.(*Built); ok && b != nil {
			return b.plan
		}
		return nil
	}
	exec.HandlerOf = func(h any) exec.ErrorHandler {
		eh, _ := h.(ErrorHandler)
		return eh.toExec()
	}
	exec.ErrInvalidTimestamp.Link(ErrInvalidTimestamp)
	exec.ErrRecordTooLarge.Link(ErrRecordTooLarge)
}

// toExec is h as the runtime calls it; nil stays nil, so the runtime still
// falls back to the application's handler.
func (h ErrorHandler) toExec() exec.ErrorHandler {
	if h == nil {
		return nil
	}
	return func(ec exec.ErrorContext) exec.Action {
		return exec.Action(h(ErrorContext{
			Class: ErrorClass(ec.Class), Node: ec.Node,
			Topic: ec.Topic, Partition: ec.Partition, Offset: ec.Offset, Timestamp: ec.Timestamp,
			Err: ec.Err,
		}))
	}
}

// Header and exec.Header have one layout: the conversion below compiles
// only while their fields agree. So a slice of one is read as a slice of
// the other in place, as it was while Header was exec.Header: no copy per
// record, and a processor's record shares its headers' array with the
// runtime's, length and capacity alike.
var _ = exec.Header(Header{})

// headersOf is hs as the Processor API shows them.
func headersOf(hs []exec.Header) []Header {
	return unsafe.Slice((*Header)(unsafe.Pointer(unsafe.SliceData(hs))), cap(hs))[:len(hs)]
}

// execHeaders is hs as the runtime carries them.
func execHeaders(hs []Header) []exec.Header {
	return unsafe.Slice((*exec.Header)(unsafe.Pointer(unsafe.SliceData(hs))), cap(hs))[:len(hs)]
}
