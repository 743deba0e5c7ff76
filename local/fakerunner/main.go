package fakerunner

import (
	"fmt"
	"io"
	"path/filepath"
	"time"
)

// Names the program answers to.
const (
	configName   = "config.sh"
	runName      = "run.sh"
	listenerName = "Runner.Listener"
	workerName   = "Runner.Worker"
)

// Env is what the program gets from its process: arguments (Args[0] is the name
// it was run as), environment and output.
type Env struct {
	Args   []string
	Getenv func(string) string
	Stdin  io.Reader // Runner.Worker's pipe from the listener
	Stdout io.Writer
	Stderr io.Writer
}

// Main runs the program as config.sh, run.sh, bin/Runner.Listener or
// bin/Runner.Worker, chosen by the base name of Args[0] or, for any other name,
// by Args[1] ("config.sh", "run.sh", "worker"), and returns its exit code.
func Main(env Env) int {
	if len(env.Args) == 0 {
		fmt.Fprintln(env.Stderr, "fakerunner: no arguments")
		return 2
	}
	name, args := filepath.Base(env.Args[0]), env.Args[1:]
	if name == listenerName && len(args) > 0 {
		switch args[0] {
		case "configure":
			name, args = configName, args[1:]
		case "run":
			name, args = runName, args[1:]
		}
	}
	if name != configName && name != runName && name != workerName && len(args) > 0 {
		name, args = args[0], args[1:]
		if name == "worker" {
			name = workerName
		}
	}
	root, err := rootDir(env.Args[0])
	if err != nil {
		fmt.Fprintf(env.Stderr, "fakerunner: finding the runner's root directory: %v\n", err)
		return 1
	}
	switch name {
	case configName:
		return configure(env, root, args)
	case runName:
		return listen(env, root, args)
	case workerName:
		return work(env, root, args)
	}
	fmt.Fprintf(env.Stderr, "fakerunner: run me as config.sh, run.sh, bin/%s or bin/%s (got %q)\n", listenerName, workerName, name)
	return 2
}

// defaultVersion is the actions/runner version the fake plays, runner/Dockerfile's
// (a test keeps them equal); FAKERUNNER_VERSION plays another, as an image built
// with another RUNNER_VERSION would be.
const defaultVersion = "2.330.0"

// version is the actions/runner version this runner reports.
func version(env Env) string {
	if v := env.Getenv("FAKERUNNER_VERSION"); v != "" {
		return v
	}
	return defaultVersion
}

// logf prints a line the way Runner.Listener does: "2006-01-02 15:04:05Z: message".
func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "%s: %s\n", time.Now().UTC().Format("2006-01-02 15:04:05Z"), fmt.Sprintf(format, args...))
}
