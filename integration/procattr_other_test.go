//go:build unix && !linux

package integration

import "syscall"

// childProcAttr has no parent-death signal to ask for outside Linux; the
// test's cleanup still kills every instance it started.
func childProcAttr() *syscall.SysProcAttr { return nil }
