// Command stack starts and stops the local stack (dynalite + etcd + kube-apiserver +
// kube-controller-manager + kube-scheduler on 127.0.0.1, and a node: containerd and
// a kubelet) that `make test` uses.
//
//	go run ./local/cmd/stack up    # start (or reuse) the stack, print its env file
//	go run ./local/cmd/stack env   # print the env file of the running stack
//	go run ./local/cmd/stack down  # stop every process of the stack
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

	"github.com/runnerscaler/runnerscaler/local/stack"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: stack up|env|down")
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
	default:
		return fmt.Errorf("unknown command %q: usage: stack up|env|down", args[0])
	}
	return nil
}
