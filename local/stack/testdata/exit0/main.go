// Command exit0 is the stack tests' container process: it sleeps for its first
// argument (a Go duration; none means no sleep) and exits 0. Further arguments are
// ignored: a test passes a token it then looks for among the machine's processes.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	var d time.Duration
	if len(os.Args) > 1 {
		var err error
		if d, err = time.ParseDuration(os.Args[1]); err != nil {
			fmt.Fprintln(os.Stderr, "exit0:", err)
			os.Exit(2)
		}
	}
	fmt.Println("exit0: running for", d)
	time.Sleep(d)
}
