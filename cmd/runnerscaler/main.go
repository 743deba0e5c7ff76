// Command runnerscaler is the operator's tool for a deployed runnerscaler:
//
//	runnerscaler drain -function <sweeper function>   drain every pool before `sam delete`
//
// Wiring only: each subcommand is a file of this directory.
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
)

// commands maps a subcommand to its entry point (args exclude the subcommand).
var commands = map[string]func(ctx context.Context, args []string) error{
	"drain": drain,
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintf(os.Stderr, "usage: runnerscaler <command> [flags]; commands: %v (-h after one for its flags)\n",
			slices.Sorted(maps.Keys(commands)))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := commands[os.Args[1]](ctx, os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "runnerscaler %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
