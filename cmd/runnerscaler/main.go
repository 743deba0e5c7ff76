// Command runnerscaler is the operator's tool for a runnerscaler deployment. It
// uses the operator's own AWS and Kubernetes credentials.
//
//	runnerscaler validate [FILE]                  check a pools file offline, every problem at once
//	runnerscaler status [POOL] [--job ID] [-o table|json|yaml]   what it is doing, and why jobs wait
//	runnerscaler drain --function NAME [--timeout 30m] [--cancel]   drain every pool before `sam delete`
//	runnerscaler import-arc [flags] FILE|DIR|- ...   ARC manifests into a pools file
//	runnerscaler version                          the build's version
//
// Each subcommand lives in its own file, with the conventions they share in
// cli.go; this one only dispatches.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"

	"github.com/runnerscaler/runnerscaler/internal/suggest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
	stop()
	os.Exit(code)
}

const help = `usage: runnerscaler COMMAND [flags]

commands:
  validate [FILE]                            check a pools file offline, every problem at once
  status [POOL] [--job ID] [-o table|json|yaml]   pools, runners, waiting jobs and why; one pool; one job's trace
  drain --function NAME [--timeout 30m] [--cancel]   stop every runner gracefully, then run 'sam delete'
  import-arc [flags] FILE|DIR|- ...           ARC manifests into a pools file
  hook-rbac [FILE]                           the RBAC objects of container-mode pools, to apply
  version [-o table|json|yaml]                the build's version

Run 'runnerscaler help COMMAND' (or 'runnerscaler COMMAND -h') for a command's flags.
`

// run runs the command line args (without the program's name) and returns the
// exit status.
func run(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, "runnerscaler: no command\nrun 'runnerscaler -h' for help\n")
		return exitBadUsage
	}
	name, rest := args[0], args[1:]
	var err error
	switch name {
	case "validate":
		err = validate(ctx, rest, e)
	case "status":
		err = runStatus(ctx, rest, e.stdout, e.stderr, e.getenv)
	case "drain":
		err = drain(ctx, rest, e)
	case "version":
		err = printVersion(rest, e)
	case "import-arc":
		return importARC(ctx, rest, e.stdin, e.stdout, e.stderr, e.getenv)
	case "hook-rbac":
		err = hookRBAC(rest, e)
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 && name == "help" && slices.Contains(commands, rest[0]) {
			return run(ctx, []string{rest[0], "-h"}, e) // help COMMAND
		}
		if len(rest) > 0 && name == "help" {
			fmt.Fprintf(e.stderr, "runnerscaler help: %s\nrun 'runnerscaler -h' for help\n", unknownCommand(rest[0]))
			return exitBadUsage
		}
		fmt.Fprint(e.stdout, help)
		return exitSuccess
	default:
		fmt.Fprintf(e.stderr, "runnerscaler: %s\nrun 'runnerscaler -h' for help\n", unknownCommand(name))
		return exitBadUsage
	}
	return Exit(name, err, e.stdout, e.stderr)
}

// commands are the CLI's commands.
var commands = []string{"validate", "status", "drain", "import-arc", "hook-rbac", "version"}

// unknownCommand says that name is no command, and which it was probably meant to be.
func unknownCommand(name string) string {
	msg := fmt.Sprintf("unknown command %q", name)
	if s := suggest.Closest(name, commands); s != "" {
		msg += "; did you mean " + s + "?"
	}
	return msg
}

// parseCommandLine parses args as run would, and runs nothing: what the docs'
// test checks their command lines with. getenv stands for the environment
// (a table named by RUNNERSCALER_TABLE, say).
func parseCommandLine(args []string, getenv func(string) string) error {
	if len(args) == 0 {
		return usagef("no command")
	}
	name, rest := args[0], args[1:]
	var err error
	switch name {
	case "validate":
		_, err = parseValidate(rest, getenv)
	case "status":
		_, err = parseStatus(rest, getenv)
	case "drain":
		_, err = parseDrain(rest)
	case "version":
		_, err = parseVersion(rest)
	case "import-arc":
		_, err = parseImport(rest, getenv, io.Discard)
	case "hook-rbac":
		_, err = parseHookRBAC(rest, getenv)
	case "help", "-h", "-help", "--help":
	default:
		err = usagef("%s", unknownCommand(name))
	}
	if errIsHelp(err) {
		return nil
	}
	return err
}
