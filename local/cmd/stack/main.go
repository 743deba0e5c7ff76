// Command stack starts and stops the local stack (dynalite + etcd + kube-apiserver +
// kube-controller-manager + kube-scheduler on 127.0.0.1, and a node: containerd and
// a kubelet) that `make test` uses.
//
//	go run ./local/cmd/stack up    # start (or reuse) the stack, print its env file
//	go run ./local/cmd/stack env   # print the env file of the running stack
//	go run ./local/cmd/stack down  # stop every process of the stack
//	go run ./local/cmd/stack restart-kubelet  # restart the node's kubelet; its containers keep running
//
// The stack lives in $RUNNERSCALER_STACK_DIR (default .stack in the repository).
// The node needs root; RUNNERSCALER_NODE=0 starts the stack without it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/runnerscaler/runnerscaler/local/stack"
)

const usage = "stack up|env|down|restart-kubelet"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: %s", usage)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	dir := os.Getenv("RUNNERSCALER_STACK_DIR")
	if dir == "" {
		dir = filepath.Join(root, ".stack")
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	switch args[0] {
	case "up":
		s, err := stack.Up(ctx, stack.Options{
			Dir: dir, Root: root, Detach: true, PersistDynamo: os.Getenv("RUNNERSCALER_PERSIST") != "",
			KubeBinDir: os.Getenv("RUNNERSCALER_KUBE_BIN"), Progress: os.Stderr,
			Node: os.Getenv("RUNNERSCALER_NODE") != "0",
		})
		if err != nil {
			return err
		}
		fmt.Print(s.EnvFile())
	case "env":
		s, err := stack.Load(dir)
		if err != nil {
			return fmt.Errorf("no stack in %s (run `stack up`): %w", dir, err)
		}
		fmt.Print(s.EnvFile())
	case "down":
		return stack.Down(dir)
	case "restart-kubelet":
		s, err := stack.Load(dir)
		if err != nil {
			return fmt.Errorf("no stack in %s (run `stack up`): %w", dir, err)
		}
		start := time.Now()
		if err := s.RestartKubelet(ctx); err != nil {
			return err
		}
		kubelet, _ := s.Proc("kubelet")
		fmt.Fprintf(os.Stderr, "stack: kubelet restarted (pid %d), node %s Ready again after %.1fs\n",
			kubelet.PID, s.NodeName, time.Since(start).Seconds())
	default:
		return fmt.Errorf("unknown command %q: usage: %s", args[0], usage)
	}
	return nil
}
