//go:build linux

package integration

import "syscall"

// childProcAttr makes the kernel kill an instance if the test binary dies
// without running its cleanups (a go test timeout, a crash), so no instance
// outlives the run and keeps writing to a reused cluster.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
