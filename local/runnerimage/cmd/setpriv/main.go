// Command setpriv is the local runner image's setpriv. runner/entrypoint.sh, which
// starts as root, runs config.sh and run.sh — and so every job step — as the runner
// user through `setpriv`: util-linux's in the image of runner/Dockerfile. Debian's
// util-linux setpriv is dynamically linked and busybox's cannot change users, so
// the local image, which has no C library, gets this static one. It does the part
// of util-linux's setpriv(1) the entrypoint uses, with the same options:
//
//	setpriv --reuid=UID --regid=GID (--init-groups | --clear-groups) [--] PROGRAM [ARGUMENT...]
//
// sets the supplementary groups (--init-groups: those /etc/group lists the user
// of UID in, as initgroups(3) does, plus GID; --clear-groups: none), then the
// real, effective and saved group and user ids, and executes PROGRAM (looked up
// in PATH when it has no slash) with the environment unchanged. Leaving uid 0
// clears the process's capabilities (the kernel does so on setresuid). UID and GID
// are numbers. Any failure — an unknown option, a user not in /etc/passwd for
// --init-groups, a refused set*id call — exits 127 with a message before PROGRAM
// runs: a program must never run with the privileges it was meant to lose.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	err := run(os.Args[1:])
	fmt.Fprintf(os.Stderr, "setpriv: %v\n", err)
	os.Exit(127)
}

// request is a parsed command line.
type request struct {
	uid, gid   int
	initGroups bool // else clear them
	argv       []string
}

func parse(args []string) (request, error) {
	r := request{uid: -1, gid: -1}
	groups := ""
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") {
			break
		}
		name, value, hasValue := strings.Cut(a, "=")
		if (name == "--reuid" || name == "--regid") && !hasValue {
			if i+1 >= len(args) {
				return r, fmt.Errorf("%s needs a value", name)
			}
			i++
			value, hasValue = args[i], true
		}
		switch {
		case name == "--reuid" || name == "--regid":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return r, fmt.Errorf("%s=%q: want a number", name, value)
			}
			if name == "--reuid" {
				r.uid = n
			} else {
				r.gid = n
			}
		case (a == "--init-groups" || a == "--clear-groups") && (groups == "" || groups == a):
			groups = a
		case a == "--init-groups" || a == "--clear-groups":
			return r, errors.New("--init-groups and --clear-groups exclude each other")
		default:
			return r, fmt.Errorf("unsupported option %q (this setpriv has --reuid, --regid, --init-groups, --clear-groups)", a)
		}
	}
	r.argv = args[i:]
	switch {
	case r.uid < 0 || r.gid < 0:
		return r, errors.New("--reuid and --regid are required")
	case groups == "":
		return r, errors.New("a user change needs --init-groups or --clear-groups")
	case len(r.argv) == 0:
		return r, errors.New("no program to run")
	}
	r.initGroups = groups == "--init-groups"
	return r, nil
}

// run returns only on failure.
func run(args []string) error {
	r, err := parse(args)
	if err != nil {
		return err
	}
	groups := []int{}
	if r.initGroups {
		if groups, err = userGroups("/etc/passwd", "/etc/group", r.uid, r.gid); err != nil {
			return err
		}
	}
	// Go applies each call to every thread of the process.
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(r.gid, r.gid, r.gid); err != nil {
		return fmt.Errorf("setresgid %d: %w", r.gid, err)
	}
	if err := syscall.Setresuid(r.uid, r.uid, r.uid); err != nil {
		return fmt.Errorf("setresuid %d: %w", r.uid, err)
	}
	if syscall.Getuid() != r.uid || syscall.Geteuid() != r.uid || syscall.Getgid() != r.gid || syscall.Getegid() != r.gid {
		return fmt.Errorf("still uid %d/%d gid %d/%d after the change", syscall.Getuid(), syscall.Geteuid(), syscall.Getgid(), syscall.Getegid())
	}
	path, err := exec.LookPath(r.argv[0]) // as the new user: it must be able to run it
	if err != nil {
		return err
	}
	return syscall.Exec(path, r.argv, os.Environ())
}

// userGroups is what initgroups(3) gives the user of uid: gid and every group
// whose member list names the user.
func userGroups(passwdFile, groupFile string, uid, gid int) ([]int, error) {
	name := ""
	err := eachLine(passwdFile, func(f []string) bool {
		if len(f) >= 3 && f[2] == strconv.Itoa(uid) {
			name = f[0]
			return false
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, fmt.Errorf("--init-groups: uid %d is not in %s", uid, passwdFile)
	}
	groups := []int{gid}
	err = eachLine(groupFile, func(f []string) bool {
		if len(f) < 4 || !slices.Contains(strings.Split(f[3], ","), name) {
			return true
		}
		if g, err := strconv.Atoi(f[2]); err == nil && !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
		return true
	})
	return groups, err
}

// eachLine calls fn with the colon-separated fields of each line of file until
// it returns false.
func eachLine(file string, fn func([]string) bool) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") && !fn(strings.Split(line, ":")) {
			return nil
		}
	}
	return sc.Err()
}
