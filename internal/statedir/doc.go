// Package statedir is the layout of an application's local state directory
// and its lock, shared by the processor, which runs in it, and by `sluice
// reset`, which deletes it:
//
//	<state.dir>/<application.id>/     App: one per application
//	    .lock                          Lock: held by the running instance
//	    instance.id                    InstanceID: kept across restarts
//	    join-metadata                  JoinMemo: a static member's last join
//	    <task id>/<store>/             Store: a task's Pebble store
//	    global/<store>/                Global: a global table's store
//
// The lock is an exclusive flock(2) on .lock, held from before the instance
// joins the group until after it left, so that two instances never share a
// directory and reset never deletes one under a live process.
package statedir
