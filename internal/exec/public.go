package exec

// What package topology hands the runtime (processor, topologytest)
// without its API showing an internal type (issue 16): a method
// Built.Plan, or ErrorHandler declared as exec's, would put exec in
// topology's go doc. exec cannot import topology, so topology fills these
// in its init and the hooks take topology's values as any.
var (
	// BuiltPlan returns the plan of a *topology.Built, nil for anything
	// else.
	BuiltPlan func(built any) *Plan
	// HandlerOf returns the runtime's form of a topology.ErrorHandler, nil
	// for a nil handler or anything else.
	HandlerOf func(h any) ErrorHandler
)

// A Sentinel is a cause the runtime finds and users match with errors.Is
// against a public package's error value (topology.ErrInvalidTimestamp):
// the public package declares its own value and links it here in its
// init, so that an error wrapping the Sentinel matches it too, while the
// public value is not declared as exec's.
type Sentinel struct {
	msg    string
	public error
}

// Error is the sentinel's message, which the public value repeats.
func (s *Sentinel) Error() string { return s.msg }

// Is matches the linked public value.
func (s *Sentinel) Is(target error) bool { return s.public != nil && target == s.public }

// Link makes errors.Is match public wherever s is wrapped. Called from an
// init only, before anything can read s.
func (s *Sentinel) Link(public error) { s.public = public }
