// Command pgrep is the runner image's pgrep: Debian's busybox-static has no
// pgrep applet and procps's is dynamically linked, so the image gets this static
// one. It does what runner/entrypoint.sh needs of procps's pgrep:
//
//	pgrep [-f] [-x] [-l] PATTERN
//
// lists the ids of the processes (itself excepted) whose name — or, with -f, whole
// command line — matches the extended regular expression PATTERN (-x: matches it
// exactly), one a line (-l: with the name or command line), and exits 0 when some
// matched, 1 when none did, 2 on a usage error.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	full, exact, long := false, false, false
	var pattern string
	for i, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" {
			if i != len(args)-1 {
				return usage("one pattern, after the options")
			}
			pattern = a
			break
		}
		for _, o := range a[1:] {
			switch o {
			case 'f':
				full = true
			case 'x':
				exact = true
			case 'l':
				long = true
			default:
				return usage(fmt.Sprintf("unknown option -%c", o))
			}
		}
	}
	if pattern == "" {
		return usage("no pattern")
	}
	if exact {
		pattern = "^(" + pattern + ")$"
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return usage(err.Error())
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	self := os.Getpid()
	found := 1
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == self {
			continue
		}
		subject, ok := describe(dir, full)
		if !ok || !re.MatchString(subject) {
			continue
		}
		found = 0
		if long {
			fmt.Println(pid, subject)
		} else {
			fmt.Println(pid)
		}
	}
	return found
}

// describe is a process's name (/proc/PID/comm) or, full, its command line with
// spaces between the arguments (a kernel thread's: its name, as procps does).
func describe(dir string, full bool) (string, bool) {
	comm, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return "", false // gone meanwhile
	}
	name := strings.TrimSuffix(string(comm), "\n")
	if !full {
		return name, true
	}
	raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return "", false
	}
	cmdline := strings.TrimRight(strings.ReplaceAll(string(raw), "\x00", " "), " ")
	if cmdline == "" {
		return name, true
	}
	return cmdline, true
}

func usage(msg string) int {
	fmt.Fprintf(os.Stderr, "pgrep: %s\nusage: pgrep [-f] [-x] [-l] PATTERN\n", msg)
	return 2
}
