// Command runnerscaler is the operator's tool for a runnerscaler deployment. It
// uses the operator's own AWS and Kubernetes credentials.
//
//	runnerscaler status [POOL] [--job ID] [-o table|json]   what it is doing, and why jobs wait
//	runnerscaler drain -function NAME [-timeout 30m] [-cancel]   drain every pool before `sam delete`
//	runnerscaler import-arc [-o FILE] [-runner-image IMAGE] FILE|DIR|- ...   ARC manifests into a pools file
//
// Each subcommand lives in its own file; this one only dispatches.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "status":
		err = runStatus(ctx, os.Args[2:], os.Stdout, os.Stderr, os.Getenv)
	case "drain":
		err = drain(ctx, os.Args[2:])
	case "import-arc":
		os.Exit(importARC(ctx, os.Args[2:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	case "help", "-h", "--help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "runnerscaler: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "runnerscaler:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: runnerscaler COMMAND [flags]

commands:
  status [POOL] [--job ID] [-o table|json]   pools, runners, waiting jobs and why; one pool's runners; one job's trace
  drain -function NAME [-timeout 30m] [-cancel]   stop every runner gracefully, then run 'sam delete'
  import-arc [-o FILE] [-runner-image IMAGE] FILE|DIR|- ...   ARC manifests into a pools file (exit 3: some fields not carried)

Run 'runnerscaler COMMAND -h' for a command's flags.
`)
}
