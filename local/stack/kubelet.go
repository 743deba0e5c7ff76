package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// RestartKubelet restarts the kubelet of the stack whose state is in dir, as
// `systemctl restart kubelet` does on a node; see Stack.RestartKubelet.
//
// Restarts of one stack by several processes (test binaries of `make test` run
// in parallel) take turns: each holds an exclusive lock on a file of the stack
// directory and reads the state only once it has it.
func RestartKubelet(ctx context.Context, dir string) error {
	lock, err := os.OpenFile(filepath.Join(dir, "kubelet-restart.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("restarting the kubelet: %w", err)
	}
	defer lock.Close() // closing releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("restarting the kubelet: locking %s: %w", lock.Name(), err)
	}
	s, err := Load(dir)
	if err != nil {
		return fmt.Errorf("restarting the kubelet: %w", err)
	}
	return s.RestartKubelet(ctx)
}

// RestartKubelet stops the stack's kubelet (SIGTERM, SIGKILL after 10 s) and
// starts it again with the same command line, appending to its log, detached from
// the calling process; records its new pid in the state file, so that Down stops
// it; and returns once the new kubelet has reported the node Ready (within 2
// minutes, or ctx's deadline). A kubelet that had died is started again too.
//
// The node's containers keep running: containerd's shims hold them while no
// kubelet runs, and the new kubelet adopts them (a container whose spec has not
// changed is neither restarted nor killed). An error after the new kubelet
// started (the old one had to be killed, or the node did not become Ready) still
// leaves the new one recorded in the state. It must not run concurrently with
// another restart (the package-level RestartKubelet serializes those) or with
// Down of the same stack.
func (s *Stack) RestartKubelet(ctx context.Context) error {
	i := slices.IndexFunc(s.Procs, func(p Proc) bool { return p.Name == "kubelet" })
	if i < 0 {
		return fmt.Errorf("restarting the kubelet: the stack in %s runs no node", s.dir)
	}
	old := s.Procs[i]
	if len(old.Cmd) == 0 {
		return fmt.Errorf("restarting the kubelet: the state in %s has no command line for it "+
			"(the stack was started by an older version: run `stack down` and `stack up`)", s.dir)
	}
	var stopErr error
	if runs(old) {
		var cmd *exec.Cmd
		if i < len(s.cmds) {
			cmd = s.cmds[i]
		}
		stopErr = terminate(old, cmd) // fails only when SIGKILL was needed: the restart goes on
	}
	// A node's heartbeat has a precision of one second: the new kubelet starts at a
	// whole second the old one never reported in, so that a Ready heartbeat from
	// then on is the new kubelet's.
	started := time.Now().Truncate(time.Second).Add(time.Second)
	select {
	case <-ctx.Done():
		return fmt.Errorf("restarting the kubelet: %w", errors.Join(ctx.Err(), stopErr))
	case <-time.After(time.Until(started)):
	}
	cmd, err := s.launch("kubelet", exec.Command(old.Cmd[0], old.Cmd[1:]...), nil, os.O_APPEND, true)
	if err != nil {
		return errors.Join(err, stopErr)
	}
	go func() { _ = cmd.Wait() }() // reaps it, should it exit while this process runs
	pid := cmd.Process.Pid
	s.Procs[i].PID = pid
	if i < len(s.cmds) {
		s.cmds[i] = nil // Stop waits for it by its pid
	}
	if err := s.save(); err != nil {
		return errors.Join(err, stopErr)
	}
	err = poll(ctx, 2*time.Minute, func() error {
		if !alive(pid) {
			return stop{fmt.Errorf("the new kubelet (pid %d) exited", pid)}
		}
		return s.nodeReady(ctx, started)
	})
	if err != nil {
		err = fmt.Errorf("waiting for node %s after restarting its kubelet (log %s): %w", NodeName, s.logPath("kubelet"), err)
	}
	return errors.Join(stopErr, err)
}

// runs reports whether p's process still runs p's command line: a pid recorded
// in the state may belong to another process once the recorded one is gone.
func runs(p Proc) bool {
	if !alive(p.PID) {
		return false
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
	return err == nil && slices.Equal(strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00"), p.Cmd)
}
