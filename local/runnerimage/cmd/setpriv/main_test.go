package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMain makes this test binary the command when SETPRIV_TEST_MAIN is set, so
// that TestDropsToTheUser runs the real thing.
func TestMain(m *testing.M) {
	if os.Getenv("SETPRIV_TEST_MAIN") != "" {
		main()
	}
	os.Exit(m.Run())
}

func TestParse(t *testing.T) {
	t.Parallel()
	ok := []struct {
		args []string
		want request
	}{
		{[]string{"--reuid=1001", "--regid=1002", "--init-groups", "--", "run.sh", "-x"}, request{1001, 1002, true, []string{"run.sh", "-x"}}},
		{[]string{"--reuid", "7", "--regid", "8", "--clear-groups", "id"}, request{7, 8, false, []string{"id"}}},
	}
	for _, tc := range ok {
		got, err := parse(tc.args)
		if err != nil || got.uid != tc.want.uid || got.gid != tc.want.gid || got.initGroups != tc.want.initGroups || !slices.Equal(got.argv, tc.want.argv) {
			t.Errorf("parse %q: %+v %v, want %+v", tc.args, got, err, tc.want)
		}
	}
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"--reuid=1001", "--init-groups", "id"}, "required"},
		{[]string{"--reuid=1001", "--regid=1001", "id"}, "--init-groups or --clear-groups"},
		{[]string{"--reuid=1001", "--regid=1001", "--init-groups", "--clear-groups", "id"}, "exclude"},
		{[]string{"--reuid=runner", "--regid=1001", "--init-groups", "id"}, "want a number"},
		{[]string{"--reuid=1001", "--regid=1001", "--clear-groups", "--nnp", "id"}, "unsupported option"},
		{[]string{"--reuid=1001", "--regid=1001", "--clear-groups", "--"}, "no program"},
		{[]string{"--reuid"}, "needs a value"},
	}
	for _, tc := range bad {
		if _, err := parse(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse %q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

func TestUserGroups(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	passwd, group := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	for file, content := range map[string]string{
		passwd: "root:x:0:0:root:/root:/bin/bash\nrunner:x:1001:1001:runner:/home/runner:/bin/bash\n",
		group:  "root:x:0:\nrunner:x:1001:\ndocker:x:998:runner\nwheel:x:10:admin,runner2\n",
	} {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := userGroups(passwd, group, 1001, 1001)
	if err != nil || !slices.Equal(got, []int{1001, 998}) {
		t.Fatalf("groups %v %v, want the primary group and docker", got, err)
	}
	if _, err := userGroups(passwd, group, 4242, 4242); err == nil {
		t.Fatal("--init-groups for a uid without a passwd entry must fail")
	}
}

// TestDropsToTheUser runs the command for real (the tests run as root here): the
// program runs with the new ids and no supplementary groups, in the caller's
// environment; a failure runs nothing.
func TestDropsToTheUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (it changes users)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "--reuid=1001", "--regid=1002", "--clear-groups", "--", "/bin/sh", "-c",
		`echo "$(id -u) $(id -g) $(id -G) $SETPRIV_TEST_VALUE"; grep -E '^(CapEff|CapPrm)' /proc/self/status`)
	cmd.Env = append(os.Environ(), "SETPRIV_TEST_MAIN=1", "SETPRIV_TEST_VALUE=kept")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || lines[0] != "1001 1002 1002 kept" || !strings.HasSuffix(lines[1], "0000000000000000") ||
		!strings.HasSuffix(lines[2], "0000000000000000") {
		t.Fatalf("output %q: want uid 1001, gid 1002, no other group, the environment kept and no capabilities", out)
	}
	cmd = exec.Command(exe, "--reuid=54321", "--regid=54321", "--init-groups", "--", "/bin/touch", filepath.Join(t.TempDir(), "ran"))
	cmd.Env = append(os.Environ(), "SETPRIV_TEST_MAIN=1")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "not in /etc/passwd") {
		t.Fatalf("--init-groups for a user the host does not have: %v %s, want a refusal", err, out)
	}
}
