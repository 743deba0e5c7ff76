// Command fakedocker is the local stack's stand-in for dockerd and the docker
// CLI, installed as dockerd and docker (see package local/fakedocker): the
// docker:27-dind image of the docker sidecar cannot be pulled there.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/runnerscaler/runnerscaler/local/fakedocker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := fakedocker.Main(ctx, fakedocker.Env{Args: os.Args, Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
