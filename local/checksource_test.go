// Tests of local/check-source.sh, which `make verify` runs: it passes a
// repository of sources and fails, naming the file, on each kind of build output
// tracked in one.
package local_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// file is a file of a test repository.
type file struct {
	path    string
	content []byte
	mode    os.FileMode
}

// repo makes a git repository in a new directory with files, all of them added
// to its index unless untracked.
func repo(t *testing.T, untracked []file, files ...file) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range append(untracked, files...) {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.content, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q")
	for _, f := range files {
		git(t, dir, "add", "--", f.path)
	}
	return dir
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// checkSource runs the check on dir: its output, and whether it passed.
func checkSource(t *testing.T, dir string) (string, bool) {
	t.Helper()
	out, err := exec.Command("bash", "check-source.sh", dir).CombinedOutput()
	if _, failed := err.(*exec.ExitError); err != nil && !failed {
		t.Fatal(err)
	}
	return string(out), err == nil
}

// elf is the start of a 64-bit little-endian ELF executable.
var elf = append([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0}, make([]byte, 56)...)

func TestCheckSource(t *testing.T) {
	t.Parallel()
	sources := []file{
		{"README.md", []byte("# sources\n"), 0o644},
		{"build.sh", []byte("#!/usr/bin/env bash\necho build\n"), 0o755},
		{"tool.py", []byte("#!/usr/bin/python3\nprint(1)\n"), 0o755},
		{"logo.png", append([]byte{0x89, 'P', 'N', 'G', 0}, make([]byte, 100)...), 0o644},
		{"exactly-1MiB.txt", bytes.Repeat([]byte("a"), 1<<20), 0o644},
		{"internal/x/testdata/big.json", bytes.Repeat([]byte(" "), 2<<20), 0o644},
		{"testdata/big.bin", bytes.Repeat([]byte{0}, 2<<20), 0o644},
	}
	untracked := []file{{"bin/bootstrap", elf, 0o755}}
	if out, ok := checkSource(t, repo(t, untracked, sources...)); !ok {
		t.Fatalf("a repository of sources (and an untracked binary) failed:\n%s", out)
	}
	cases := []struct {
		name string
		add  file
		want string
	}{
		{"ELF", file{"functions/webhook/bootstrap", elf, 0o644}, "functions/webhook/bootstrap: an ELF executable"},
		{"executable ELF", file{"bin/sweeper", elf, 0o755}, "bin/sweeper: an ELF executable"},
		{"Mach-O", file{"runnerscaler", append([]byte{0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1}, make([]byte, 24)...), 0o644}, "runnerscaler: a Mach-O executable"},
		{"executable without #!", file{"notes.txt", []byte("echo hi\n"), 0o755}, "notes.txt: executable but not a script"},
		{"over 1 MiB", file{"local/dump.json", bytes.Repeat([]byte("a"), 1<<20+1), 0o644}, "local/dump.json: 1048577 bytes, over 1 MiB"},
		{"over 1 MiB in a directory named like testdata", file{"testdata2/big.json", bytes.Repeat([]byte("a"), 1<<20+1), 0o644}, "testdata2/big.json: 1048577 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, ok := checkSource(t, repo(t, nil, append(sources, c.add)...))
			if ok || !strings.Contains(out, c.want) {
				t.Fatalf("passed %v with output:\n%s\nwant a failure naming %q", ok, out, c.want)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			for _, l := range lines[:len(lines)-1] { // the last one sums up
				if !strings.HasPrefix(l, "check-source: "+c.add.path+": ") {
					t.Fatalf("output:\n%s\nwant only %s named", out, c.add.path)
				}
			}
		})
	}
}
