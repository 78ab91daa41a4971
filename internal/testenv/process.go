package testenv

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// StartTied starts cmd so that the kernel kills it (SIGKILL) when this
// process ends, however it ends: a normal exit, a panic, a test timeout or
// a SIGKILL. Callers still stop and Wait for cmd themselves; the tie is for
// when they cannot. The tie does not reach cmd's own children. Existing
// SysProcAttr settings (such as Setpgid) are kept.
func StartTied(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	errc := make(chan error, 1)
	tiedStarter() <- func() { errc <- cmd.Start() }
	return <-errc
}

// tiedStarter runs every StartTied on one goroutine locked to its OS thread
// for good. Pdeathsig fires when the thread that forked the child ends, not
// the process (go.dev/issue/27505), and a Go thread ends when a goroutine
// locked to it returns; forking from a thread that never ends makes the
// signal mean "this process died".
var tiedStarter = sync.OnceValue(func() chan<- func() {
	starts := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked
		for start := range starts {
			start()
		}
	}()
	return starts
})
