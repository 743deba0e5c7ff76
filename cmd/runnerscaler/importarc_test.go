package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/arcimport"
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
// not (each listed on stderr), 2 for bad usage (one line) or input with
// nothing convertible (why listed, nothing written); the pools go to stdout or
// --out, as YAML or JSON, and load.
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
		{"nothing converts", "", []string{examples + "09-runner-repository.yaml"}, 2, false, "no pool could be converted (why is listed above); nothing written"},
		{"not YAML", "kind: [\n", []string{"-"}, 2, false, "bad input"},
		{"a key twice", "kind: RunnerDeployment\nspec:\n  replicas: 1\n  replicas: 2\n", []string{"-"}, 2, false, `line 4: key "replicas" repeats the key of line 3`},
		{"no ARC object", "apiVersion: v1\nkind: List\nitems: []\n", []string{"-"}, 2, false, "no ARC runner scale set, RunnerDeployment or RunnerSet"},
		{"a scale set's values", "githubConfigUrl: https://github.com/acme\nrunnerScaleSetName: arc-runner-set\nmaxRunners: 3\n", []string{"-runner-image", "r:1", "-"}, 0, true, ""},
		{"a scale set without its name", "githubConfigUrl: https://github.com/acme\nmaxRunners: 3\n", []string{"-runner-image", "r:1", "-"}, 2, false, "--release RELEASE"},
		{"a scale set with its release", "githubConfigUrl: https://github.com/acme\nmaxRunners: 3\n", []string{"-runner-image", "r:1", "--release", "ci", "-"}, 0, true, ""},
		{"no input named", "", nil, 2, false, "name at least one"},
		{"unknown flag", "", []string{"-nope", "-"}, 2, false, "unknown flag --nope"},
		{"a misspelt flag", "", []string{"--runner-imag", "r:1", "-"}, 2, false, "unknown flag --runner-imag; did you mean --runner-image?"},
		{"one pool", "", []string{examples + "04-acceptance-v022-repo-runnerdeploy-hra.yaml"}, 3, true, "import-arc: 1 pool converted; "},
		{"-o is a format", "", []string{"-o", "pools.yaml", "-"}, 2, false, "want yaml, json"},
		{"--out and --merge", "", []string{"--out", "a", "--merge", "b", "-"}, 2, false, "give one"},
		{"missing file", "", []string{"does-not-exist.yaml"}, 2, false, "does-not-exist.yaml"},
		{"-o json", "", []string{"-o", "json", "-runner-image", "r:1", examples + "04-acceptance-v022-repo-runnerdeploy-hra.yaml"}, 0, true, ""},
		{"--out", "", []string{"--out", out, "-runner-image", "r:1", examples + "04-acceptance-v022-repo-runnerdeploy-hra.yaml"}, 0, false, ""},
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
		t.Fatalf("--out %s: %v", out, err)
	}
}

// TestImportARCWritesWhatItDidNotCarryIntoTheFile: a pools file written with
// --out heads with what was not carried and the notes, as comments, so that
// its reviewer has them without the import's stderr; the file still loads.
func TestImportARCWritesWhatItDidNotCarryIntoTheFile(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "pools.yaml")
	r := runImport(t, "", noEnv, "--out", out, examples+"04-acceptance-v022-repo-runnerdeploy-hra.yaml")
	if r.code != 3 {
		t.Fatalf("exit %d, want 3; stderr:\n%s", r.code, r.stderr)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(line, "not carried: ") || strings.HasPrefix(line, "note: ") {
			if !strings.Contains(string(raw), "# "+line+"\n") {
				t.Errorf("%s lacks the comment %q:\n%s", out, "# "+line, raw)
			}
		}
	}
	if !strings.HasPrefix(string(raw), "# not carried: ") {
		t.Errorf("%s does not begin with what was not carried:\n%s", out, raw)
	}
	if _, err := pool.Load(out); err != nil {
		t.Fatalf("--out %s: %v", out, err)
	}
}

// TestImportARCUsageLine: a usage error is one line and a pointer to the
// help, on stderr; -h prints the help on stdout and exits 0.
func TestImportARCUsageLine(t *testing.T) {
	t.Parallel()
	r := runImport(t, "", noEnv, "-nope", "-")
	if r.code != 2 || strings.Count(r.stderr, "\n") != 2 || !strings.Contains(r.stderr, "run 'runnerscaler import-arc -h' for help") || r.stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q: want 2 and one line with the pointer to -h", r.code, r.stdout, r.stderr)
	}
	r = runImport(t, "", noEnv, "-h")
	if r.code != 0 || !strings.Contains(r.stdout, "usage: runnerscaler import-arc") || !strings.Contains(r.stdout, "--merge") || r.stderr != "" {
		t.Errorf("-h: exit %d, stdout %q, stderr %q: want the help on stdout, exit 0", r.code, r.stdout, r.stderr)
	}
}

// TestImportARCNeverOverwrites: --out refuses an existing file and leaves it
// as it was.
func TestImportARCNeverOverwrites(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "pools.yaml")
	const was = "pools:\n  - name: mine\n"
	if err := os.WriteFile(out, []byte(was), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runImport(t, "", noEnv, "--out", out, "-runner-image", "r:1", examples+"04-acceptance-v022-repo-runnerdeploy-hra.yaml")
	if r.code != 1 || !strings.Contains(r.stderr, "never overwrites") || !strings.Contains(r.stderr, "--merge "+out) {
		t.Fatalf("exit %d, want 1 with --merge suggested; stderr:\n%s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(out); string(got) != was {
		t.Fatalf("%s changed:\n%s", out, got)
	}
}

// existingPools is a pools file as an operator keeps it: comments, its own
// indentation, a second pool.
const existingPools = `# Our pools. Reviewed by the platform team.
pools:
# the default pool
- name: linux
  organization: acme
  maxReplicas: 4   # budget: 4 nodes
  kubernetes:
    namespace: actions-runners
    image: registry.example/runner:1

- name: big
  organization: acme
  labels: [big]
  maxReplicas: 2
  kubernetes: {namespace: actions-runners, image: registry.example/runner:1}
# end of the list`

// TestImportARCMerge: --merge adds the converted pools to an existing file,
// which keeps every byte it had (pools, comments, indentation); the result
// passes the sweeper's checks; a pool name the file already has is refused,
// naming both, and nothing is written.
func TestImportARCMerge(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(file, []byte(existingPools), 0o600); err != nil {
		t.Fatal(err)
	}
	values := "githubConfigUrl: https://github.com/acme\nrunnerScaleSetName: arc-runner-set\nminRunners: 1\nmaxRunners: 5\n"
	r := runImport(t, values, noEnv, "--merge", file, "-runner-image", "r:1", "-")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "added pools arc-runner-set to "+file) {
		t.Fatalf("exit %d, stdout %q; stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), existingPools+"\n") {
		t.Fatalf("the existing bytes were changed:\n%s", got)
	}
	cfg, err := arcimport.Check(got)
	if err != nil {
		t.Fatalf("merged file: %v\n%s", err, got)
	}
	p := cfg.Pool("arc-runner-set")
	if len(cfg.Pools) != 3 || cfg.Pool("linux") == nil || cfg.Pool("big") == nil || p == nil || p.MinReplicas != 1 || p.Max() != 5 {
		t.Fatalf("pools %+v: want linux, big and arc-runner-set (min 1, max 5)", cfg.Pools)
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want the file's own 0600", info.Mode(), err)
	}

	r = runImport(t, strings.Replace(values, "arc-runner-set", "big", 1), noEnv, "--merge", file, "-runner-image", "r:1", "-")
	if r.code != 2 || !strings.Contains(r.stderr, "pool big converted from stdin, document 1: gha-runner-scale-set values, and pool big of "+file+" (line 11)") ||
		!strings.Contains(r.stderr, "nothing written") {
		t.Fatalf("a clash: exit %d, want 2 naming both pools; stderr:\n%s", r.code, r.stderr)
	}
	if again, _ := os.ReadFile(file); string(again) != string(got) {
		t.Fatalf("a refused merge changed the file:\n%s", again)
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
	if r.code != 3 || !strings.Contains(r.stderr, "the API server admits the runners of every pool, 1 pool") {
		t.Fatalf("exit %d, want 3 (admitted, with fields not carried); stderr:\n%s", r.code, r.stderr)
	}
	r = runImport(t, "", noEnv, "-kubeconfig", kubeconfig, "-namespace", ns+"-missing", "-docker-namespace", ns+"-missing", "-runner-image", "r:1", file)
	if r.code != 1 || !strings.Contains(r.stderr, "does not admit its StatefulSet") || !strings.Contains(r.stdout, "pools:") {
		t.Fatalf("exit %d, want 1 with the pools written; stderr:\n%s", r.code, r.stderr)
	}
}
