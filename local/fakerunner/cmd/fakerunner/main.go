// Command fakerunner is the fake actions runner of the local stack's runner
// image, installed as config.sh, run.sh, bin/Runner.Listener and bin/Runner.Worker
// (see package local/fakerunner).
package main

import (
	"os"

	"github.com/runnerscaler/runnerscaler/local/fakerunner"
)

func main() {
	os.Exit(fakerunner.Main(fakerunner.Env{Args: os.Args, Getenv: os.Getenv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}
