package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

func TestUnescapeMount(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`/tmp/a`:              "/tmp/a",
		`/tmp/with\040space`:  "/tmp/with space",
		`/tmp/tab\011and\134`: "/tmp/tab\tand\\",
		`/tmp/trailing\04`:    `/tmp/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNetwork checks that stacks side by side get their own bridge, within the
// kernel's 15-character limit on interface names, and a 10.244.x.0/24 range.
func TestNetwork(t *testing.T) {
	t.Parallel()
	name1, bridge1, subnet1 := node{"/tmp/stack-a"}.network()
	name2, bridge2, _ := node{"/tmp/stack-b"}.network()
	if name1 == name2 || bridge1 == bridge2 {
		t.Errorf("two stacks share network %s / bridge %s", name1, bridge1)
	}
	if len(bridge1) > 15 {
		t.Errorf("bridge name %q is longer than 15 characters", bridge1)
	}
	if !strings.HasPrefix(subnet1, "10.244.") || !strings.HasSuffix(subnet1, ".0/24") {
		t.Errorf("subnet %q, want 10.244.x.0/24", subnet1)
	}
}

// fakeHost is a machine with the files of present, where installing Debian's
// packages adds the files of installs (and fails with installErr).
type fakeHost struct {
	present    map[string]bool
	installs   []string
	installErr error
	installed  [][]string // the packages of each install
	stderr     strings.Builder
}

// nodeFiles is what Debian's packages for the node put on a machine.
var nodeFiles = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc",
	"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback"}

func (f *fakeHost) host(euid int) nodeHost {
	find := func(name string) error {
		if !f.present[name] {
			return fs.ErrNotExist
		}
		return nil
	}
	return nodeHost{euid: euid, stderr: &f.stderr,
		lookPath: func(file string) (string, error) { return "/usr/bin/" + file, find(file) },
		stat:     func(name string) (fs.FileInfo, error) { return nil, find(name) },
		install: func(_ context.Context, packages []string, out io.Writer) error {
			f.installed = append(f.installed, packages)
			fmt.Fprintln(out, "apt-get: ...")
			for _, file := range f.installs {
				f.present[file] = true
			}
			return f.installErr
		},
	}
}

// TestNodePrerequisites: root with apt-get gets the node's packages installed,
// and is told so on stderr; anyone else (not root, or no apt-get) is told the
// apt-get command to run, and nothing is installed.
func TestNodePrerequisites(t *testing.T) {
	t.Parallel()
	const aptCommand = "`apt-get update && apt-get install -y containerd runc containernetworking-plugins`"
	with := func(files ...string) map[string]bool {
		m := map[string]bool{}
		for _, f := range files {
			m[f] = true
		}
		return m
	}
	cases := []struct {
		name     string
		euid     int
		host     *fakeHost
		wantErr  []string // what the error says; none: no error
		installs bool
	}{
		{"root with everything", 0, &fakeHost{present: with(nodeFiles...)}, nil, false},
		{"root with apt-get", 0, &fakeHost{present: with("apt-get", "containerd"), installs: nodeFiles}, nil, true},
		{"root without apt-get", 0, &fakeHost{present: with("containerd")}, []string{"needs containerd-shim-runc-v2, ctr, runc, /usr/lib/cni/bridge", aptCommand}, false},
		{"not root", 1000, &fakeHost{present: with("apt-get")}, []string{"needs root", "RUNNERSCALER_NODE=0"}, false},
		{"apt-get fails", 0, &fakeHost{present: with("apt-get"), installErr: errors.New("apt-get install: exit status 100")},
			[]string{"exit status 100", "needs containerd, ", aptCommand}, true},
		{"installed, still missing", 0, &fakeHost{present: with("apt-get"), installs: nodeFiles[:4]},
			[]string{"after installing", "needs /usr/lib/cni/bridge, /usr/lib/cni/host-local, /usr/lib/cni/loopback:", aptCommand}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := nodePrerequisites(t.Context(), c.host.host(c.euid))
			if len(c.wantErr) == 0 && err != nil {
				t.Fatalf("error %v, want none", err)
			}
			for _, want := range c.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want one saying %q", err, want)
				}
			}
			if !c.installs {
				if len(c.host.installed) != 0 || c.host.stderr.Len() != 0 {
					t.Fatalf("installed %v, said %q; want nothing installed and nothing said", c.host.installed, c.host.stderr.String())
				}
				return
			}
			want := []string{"containerd", "runc", "containernetworking-plugins"}
			if len(c.host.installed) != 1 || !slices.Equal(c.host.installed[0], want) {
				t.Fatalf("installed %v, want %v once", c.host.installed, want)
			}
			if said := c.host.stderr.String(); !strings.Contains(said, "installing Debian's packages containerd runc containernetworking-plugins") ||
				!strings.Contains(said, "apt-get: ...") {
				t.Fatalf("said %q, want what it installs, then apt-get's output", said)
			}
		})
	}
}
