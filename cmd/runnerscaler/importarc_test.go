package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

const examples = "../../internal/arcimport/testdata/arc-manifests/examples/"

func noEnv(string) string { return "" }

type importRun struct {
	code           int
	stdout, stderr string
}

func runImport(t *testing.T, stdin string, getenv func(string) string, args ...string) importRun {
	t.Helper()
	var out, errOut bytes.Buffer
	code := importARC(t.Context(), args, strings.NewReader(stdin), &out, &errOut, getenv)
	return importRun{code: code, stdout: out.String(), stderr: errOut.String()}
}

// TestImportARCExitCodes: 0 when everything was carried, 3 when something was
// not (each listed on stderr), 2 for bad usage or input; the pools go to
// stdout or -o, and load.
func TestImportARCExitCodes(t *testing.T) {
	t.Parallel()
	stdin, err := os.ReadFile(examples + "04-acceptance-v022-repo-runnerdeploy-hra.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "pools.yaml")
	for _, tc := range []struct {
		name     string
		stdin    string
		args     []string
		code     int
		pools    bool   // stdout is a pools file
		inStderr string // stderr says this
	}{
		{"everything carried", "", []string{"-runner-image", "r:1", examples + "04-acceptance-v022-repo-runnerdeploy-hra.yaml"}, 0, true, "not dry-run"},
		{"ARC's image kept and reported", "", []string{examples + "04-acceptance-v022-repo-runnerdeploy-hra.yaml"}, 3, true, "not carried: " + examples + "04-acceptance-v022-repo-runnerdeploy-hra.yaml: document 1: spec.template.spec.image"},
		{"metrics dropped", "", []string{"-runner-image", "r:1", examples + "27-rd-hra-percentage-busy-anti-flapping.yaml"}, 3, true, "document 2: spec.metrics[0]: metric PercentageRunnersBusy"},
		{"stdin", string(stdin), []string{"-runner-image", "r:1", "-"}, 0, true, ""},
		{"a directory, flags after it", "", []string{examples, "-runner-image", "r:1"}, 3, true, "17 pools converted"},
		{"nothing converts", "", []string{examples + "09-runner-repository.yaml"}, 3, false, "no pool could be converted"},
		{"not YAML", "kind: [\n", []string{"-"}, 2, false, "bad input"},
		{"no ARC object", "apiVersion: v1\nkind: List\nitems: []\n", []string{"-"}, 2, false, "no ARC RunnerDeployment or RunnerSet"},
		{"no input named", "", nil, 2, false, "name at least one"},
		{"unknown flag", "", []string{"-nope", "-"}, 2, false, "flag provided but not defined"},
		{"missing file", "", []string{"does-not-exist.yaml"}, 2, false, "does-not-exist.yaml"},
		{"-o", "", []string{"-o", out, "-runner-image", "r:1", examples + "04-acceptance-v022-repo-runnerdeploy-hra.yaml"}, 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runImport(t, tc.stdin, noEnv, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.inStderr) {
				t.Fatalf("exit %d, want %d; stderr (want %q):\n%s", r.code, tc.code, tc.inStderr, r.stderr)
			}
			if _, err := pool.Parse([]byte(r.stdout)); (err == nil) != tc.pools {
				t.Fatalf("stdout loads: %v, want a pools file: %v\n%s", err, tc.pools, r.stdout)
			}
		})
	}
	if _, err := pool.Load(out); err != nil {
		t.Fatalf("-o %s: %v", out, err)
	}
}

// TestImportARCDryRun: with a kubeconfig the converted pools are dry-run on
// the API server (the local stack's), which admits the example's runners in
// an existing namespace (exit 0) and refuses them in a missing one (exit 1,
// the file still written).
func TestImportARCDryRun(t *testing.T) {
	t.Parallel()
	_, ns := testenv.Namespace(t)
	kubeconfig := testenv.Kubeconfig(t)
	file := examples + "07-acceptance-v027-org-runnerdeploy-k8s-mode-hra.yaml"
	r := runImport(t, "", func(k string) string {
		if k == "KUBECONFIG" {
			return kubeconfig
		}
		return ""
	}, "-namespace", ns, "-docker-namespace", ns, "-runner-image", "r:1", file)
	if r.code != 3 || !strings.Contains(r.stderr, "the API server admits the runners of all 1 pools") {
		t.Fatalf("exit %d, want 3 (admitted, with fields not carried); stderr:\n%s", r.code, r.stderr)
	}
	r = runImport(t, "", noEnv, "-kubeconfig", kubeconfig, "-namespace", ns+"-missing", "-docker-namespace", ns+"-missing", "-runner-image", "r:1", file)
	if r.code != 1 || !strings.Contains(r.stderr, "does not admit its StatefulSet") || !strings.Contains(r.stdout, "pools:") {
		t.Fatalf("exit %d, want 1 with the pools written; stderr:\n%s", r.code, r.stderr)
	}
}
