package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs `runnerscaler args...` with no environment and returns its exit
// status and outputs.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }})
	return code, out.String(), errOut.String()
}

// TestUsageErrorsAreOneLine: a usage error exits 2 and says, on stderr, one
// line and where the help is, and nothing on stdout: no flag error twice, no
// help before it.
func TestUsageErrorsAreOneLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "runnerscaler: no command\nrun 'runnerscaler -h' for help\n"},
		{[]string{"stauts"}, "runnerscaler: unknown command \"stauts\"; did you mean status?\nrun 'runnerscaler -h' for help\n"},
		{[]string{"frobnicate"}, "runnerscaler: unknown command \"frobnicate\"\nrun 'runnerscaler -h' for help\n"},
		{[]string{"help", "stauts"}, "runnerscaler help: unknown command \"stauts\"; did you mean status?\nrun 'runnerscaler -h' for help\n"},
		{[]string{"status", "--nope"}, "runnerscaler status: unknown flag --nope\nrun 'runnerscaler status -h' for help\n"},
		{[]string{"status", "--tabel", "t"}, "runnerscaler status: unknown flag --tabel; did you mean --table?\nrun 'runnerscaler status -h' for help\n"},
		{[]string{"status", "--table"}, "runnerscaler status: flag needs an argument: --table\nrun 'runnerscaler status -h' for help\n"},
		{[]string{"drain", "--function", "f", "--timeout", "abc"}, "runnerscaler drain: invalid value \"abc\" for flag --timeout: " +
			"want a positive duration with its unit, such as 90s, 15m or 1h30m\nrun 'runnerscaler drain -h' for help\n"},
		{[]string{"status", "-o", "xml", "--table", "t"}, "runnerscaler status: invalid value \"xml\" for flag -o: want table, json, yaml\nrun 'runnerscaler status -h' for help\n"},
		{[]string{"status"}, "runnerscaler status: --table is required (the stack output TableName, or RUNNERSCALER_TABLE)\nrun 'runnerscaler status -h' for help\n"},
		{[]string{"drain"}, "runnerscaler drain: --function is required (the stack output SweeperFunctionName)\nrun 'runnerscaler drain -h' for help\n"},
		{[]string{"drain", "--function", "f:nudge"}, "run 'runnerscaler drain -h' for help\n"},
		{[]string{"validate", "a.yaml", "b.yaml"}, "runnerscaler validate: one FILE at most, got [\"a.yaml\" \"b.yaml\"]\nrun 'runnerscaler validate -h' for help\n"},
		{[]string{"version", "extra"}, "runnerscaler version: no arguments, got [\"extra\"]\nrun 'runnerscaler version -h' for help\n"},
	} {
		code, stdout, stderr := runCLI(t, c.args...)
		if code != 2 || stdout != "" || !strings.HasSuffix(stderr, c.want) || strings.Count(stderr, "\n") != 2 {
			t.Errorf("runnerscaler %q: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, stderr ending %q in two lines",
				c.args, code, stdout, stderr, c.want)
		}
	}
}

// TestHelpGoesToStdout: -h prints the command's help on stdout and exits 0.
func TestHelpGoesToStdout(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"help"}, {"status", "-h"}, {"drain", "--help"}, {"validate", "-h"}, {"version", "-h"}} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 || !strings.HasPrefix(stdout, "usage: runnerscaler") || stderr != "" {
			t.Errorf("runnerscaler %q: exit %d, stdout %q, stderr %q; want exit 0 and the help on stdout", args, code, stdout, stderr)
		}
	}
	if _, stdout, _ := runCLI(t, "status", "-h"); !strings.Contains(stdout, "\n  --region string\n") || !strings.Contains(stdout, "\n  --kubeconfig string\n") ||
		!strings.Contains(stdout, "\n  -o format\n") {
		t.Errorf("status -h lacks --region, --kubeconfig or -o as the docs write them:\n%s", stdout)
	}
	if _, stdout, _ := runCLI(t, "drain", "-h"); !strings.Contains(stdout, "\n  --timeout duration\n") {
		t.Errorf("drain -h lacks --timeout duration:\n%s", stdout)
	}
}

// TestHelpCommandIsTheCommandsHelp: `help COMMAND` prints the command's own
// help, as `COMMAND -h` does, not the global one.
func TestHelpCommandIsTheCommandsHelp(t *testing.T) {
	t.Parallel()
	for _, name := range commands {
		code, stdout, stderr := runCLI(t, "help", name)
		_, want, _ := runCLI(t, name, "-h")
		if code != 0 || stdout != want || stderr != "" || !strings.HasPrefix(stdout, "usage: runnerscaler "+name) {
			t.Errorf("help %s: exit %d, stdout %q, stderr %q; want %s -h's help", name, code, stdout, stderr, name)
		}
	}
}

// TestVersion: version prints the build's version in each output format.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "runnerscaler devel") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
	code, stdout, _ = runCLI(t, "version", "-o", "json")
	var v versionInfo
	if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil || v.Version != "devel" || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("version -o json: exit %d, %q (%v)", code, stdout, err)
	}
	if code, stdout, _ = runCLI(t, "version", "-o", "yaml"); code != 0 || !strings.Contains(stdout, "version: devel\n") {
		t.Errorf("version -o yaml: exit %d, %q", code, stdout)
	}
}

// TestVersionInStatusJSON: status -o json of every pool carries the build's
// version beside the report's fields.
func TestVersionInStatusJSON(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	o := &outputFormat{value: "json"}
	if err := o.Write(&out, statusReport{Version: "v1.2.3", Report: nil}, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"version": "v1.2.3"`) {
		t.Errorf("status -o json = %s, want the version", out.String())
	}
}

// TestValidateReportsEveryProblem: a file with an unknown field and a bad
// template: both, at their lines, exit 1; -o json says the same on stdout.
func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	const file = "testdata/two-errors.yaml"
	code, stdout, stderr := runCLI(t, "validate", file)
	want := file + ":4:5: pools[0].lables: unknown field; did you mean labels?\n" +
		file + ":13:15: pools[0] (linux): kubernetes.template.spec.containers[0].resource: unknown field; did you mean resources?\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("validate: exit %d, stdout %q, stderr:\n%s\nwant exit 1 and:\n%s", code, stdout, stderr, want)
	}
	code, stdout, _ = runCLI(t, "validate", "-o", "json", file)
	var report validation
	if err := json.Unmarshal([]byte(stdout), &report); code != 1 || err != nil || report.Valid || len(report.Problems) != 2 || report.Problems[1].Line != 13 {
		t.Errorf("validate -o json: exit %d, %s (%v)", code, stdout, err)
	}
	if code, stdout, _ = runCLI(t, "validate", "../../infra/pools.example.yaml"); code != 0 || !strings.HasSuffix(stdout, ": valid\n") {
		t.Errorf("validate of the example: exit %d, %q", code, stdout)
	}
	if code, _, stderr = runCLI(t, "validate", "missing.yaml"); code != 1 || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("validate missing.yaml: exit %d, %q", code, stderr)
	}
}

// TestNoPoolsFileNamesTheFlag: outside a checkout, with no pools file given,
// status says which flag gives it (there is no default that only works in the
// repository).
func TestNoPoolsFileNamesTheFlag(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCLI(t, "status", "--table", "t") // cmd/runnerscaler has no pools.yaml
	if code != 2 || !strings.Contains(stderr, "no pools file: give --pools FILE") {
		t.Errorf("status with no pools file: exit %d, %q", code, stderr)
	}
	if code, _, stderr = runCLI(t, "validate"); code != 2 || !strings.Contains(stderr, "no pools file: give FILE") {
		t.Errorf("validate with no pools file: exit %d, %q", code, stderr)
	}
}

// TestMissingCredentialsNameTheFlag: no region and no kubeconfig are errors
// that name --region and --kubeconfig, not the SDKs' own words.
func TestMissingCredentialsNameTheFlag(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, "none"))
	t.Setenv("KUBECONFIG", filepath.Join(home, "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if _, err := loadAWS(t.Context(), ""); err == nil || !strings.Contains(err.Error(), "--region") {
		t.Errorf("no region: %v, want an error naming --region", err)
	}
	if cfg, err := loadAWS(t.Context(), "eu-west-1"); err != nil || cfg.Region != "eu-west-1" {
		t.Errorf("--region eu-west-1: %v, %v", cfg.Region, err)
	}
	_, err := loadKube("", "")
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig") || strings.Contains(err.Error(), "KUBERNETES_MASTER") {
		t.Errorf("no kubeconfig: %v, want an error naming --kubeconfig", err)
	}
	if _, err := os.Stat(filepath.Join(home, "none")); err == nil {
		t.Error("a config file was written")
	}
}

// TestStatusReportsPoolsFileProblemsAsValidate: a pools file that does not
// load is reported by status in validate's FILE:LINE:COLUMN: MESSAGE form.
func TestStatusReportsPoolsFileProblemsAsValidate(t *testing.T) {
	t.Parallel()
	bad, err := filepath.Abs("testdata/two-errors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, _, validateErr := runCLI(t, "validate", bad)
	code, _, stderr := runCLI(t, "status", "--table", "t", "--pools", bad, "--region", "eu-west-1")
	firstProblem, _, _ := strings.Cut(validateErr, "\n")
	if code != 1 || !strings.Contains(stderr, "\n"+firstProblem+"\n") || !strings.HasPrefix(firstProblem, bad+":4:5: ") {
		t.Fatalf("status: exit %d, stderr:\n%s\nwant validate's line %q", code, stderr, firstProblem)
	}
}
