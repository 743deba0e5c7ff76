package arcimport_test

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/arcimport"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current conversion")

// corpus is ARC's own manifests (testdata/arc-manifests, with its README and
// license): acceptance data, documentation examples and a Helm chart's output;
// and ARC's runner scale sets (testdata/arc-scale-sets, with its README and
// license): the gha-runner-scale-set chart's default values and its test values.
func corpus(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"arc-manifests/examples", "arc-manifests/acceptance/*", "arc-scale-sets/values"} {
		m, err := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 50 {
		t.Fatalf("%d corpus files: testdata/arc-manifests or testdata/arc-scale-sets is incomplete", len(files))
	}
	return files
}

func source(t *testing.T, file string) arcimport.Source {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return arcimport.Source{Name: filepath.Base(file), Data: raw}
}

// loads fails the test unless the pools file loads and every pool's template
// passes the sweeper's own checks (runnerpod.Validate).
func loads(t *testing.T, raw []byte) *pool.Config {
	t.Helper()
	cfg, err := pool.Parse(raw)
	if err != nil {
		t.Fatalf("the converted pools do not load: %v\n%s", err, raw)
	}
	if err := runnerpod.Validate(cfg); err != nil {
		t.Fatalf("the converted pools fail the sweeper's validation: %v\n%s", err, raw)
	}
	return cfg
}

// TestCorpus: every file of ARC's corpus either converts into pools that load
// and pass the sweeper's validation, or reports what it could not carry — and
// the output (pools, what was not carried, notes) is exactly the reviewed
// golden file's (go test -update rewrites them).
func TestCorpus(t *testing.T) {
	for _, file := range corpus(t) {
		t.Run(corpusName(file), func(t *testing.T) {
			res, err := arcimport.Convert([]arcimport.Source{source(t, file)}, corpusOptions)
			if err != nil {
				t.Fatal(err)
			}
			if res.Pools == nil && len(res.Dropped) == 0 {
				t.Fatal("neither a pool nor a report")
			}
			if res.Pools != nil {
				cfg := loads(t, res.Pools)
				if got := len(cfg.Pools); got != len(res.Names) {
					t.Fatalf("%d pools, %d names", got, len(res.Names))
				}
			}
			golden(t, file, render(res))
		})
	}
}

// corpusOptions: the release name is the one ARC's chart tests install the
// values with; without it a values file that does not set runnerScaleSetName
// is not convertible (its runs-on label is unknown).
var corpusOptions = arcimport.Options{Release: "test-runners"}

// render is a conversion's whole outcome as text.
func render(res arcimport.Result) string {
	var b strings.Builder
	for _, d := range res.Dropped {
		b.WriteString("# not carried: " + d.String() + "\n")
	}
	for _, n := range res.Notes {
		b.WriteString("# note: " + n + "\n")
	}
	b.Write(res.Pools)
	return b.String()
}

func golden(t *testing.T, file, got string) {
	t.Helper()
	path := filepath.Join("testdata/golden", strings.ReplaceAll(corpusName(file), "/", "_"))
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if got != string(want) {
		t.Fatalf("conversion of %s differs from %s:\n--- got\n%s\n--- want\n%s", file, path, got, want)
	}
}

// TestCorpusReportsWhatARCUsersMustNotice: for each example, the corpus'
// README names what an importer must notice; each is reported, at its path
// (document number, then path; the whole document when the path is empty). With
// a runnerscaler runner image, the examples that need nothing else convert with
// nothing dropped (nil).
func TestCorpusReportsWhatARCUsersMustNotice(t *testing.T) {
	must := map[string][]string{
		"01-acceptance-v021-repo-runnerdeploy-hra.yaml": {"2:spec.scaleUpTriggers[0].githubEvent.checkRun", "2:spec.metrics[0]", "2:spec.metrics[1]"},
		"02-acceptance-v021-org-runnerdeploy-hra.yaml":  {"2:spec.scaleUpTriggers[0].githubEvent.checkRun", "2:spec.metrics[0]", "2:spec.metrics[1]"},
		"03-acceptance-v021-repo-runnerset-hra.yaml":    {"2:spec.scaleUpTriggers[0].githubEvent.checkRun", "2:spec.metrics[0]", "2:spec.metrics[1]"},
		"04-acceptance-v022-repo-runnerdeploy-hra.yaml": nil, // githubEvent: {} is v0.22's workflow_job trigger
		"14-runnerdeployment-basic.yaml":                nil,
		"15-runnerdeployment-dind.yaml":                 nil,
		"17-runnerdeployment-labels.yaml":               nil,
		"20-runnerdeployment-irsa.yaml":                 nil,
		"24-runnerset-basic.yaml":                       nil,
		"07-acceptance-v027-org-runnerdeploy-k8s-mode-hra.yaml": {"1:", "2:", "3:spec.template.spec.dockerEnv", "3:spec.template.spec.dockerMTU",
			"3:spec.template.spec.terminationGracePeriodSeconds"},
		"08-acceptance-v027-repo-runnerset-hra.yaml":   {"1:", "6:", "8:spec.metrics[0]"},
		"09-runner-repository.yaml":                    {"1:"},
		"10-runner-organization.yaml":                  {"1:"},
		"11-runner-enterprise.yaml":                    {"1:"},
		"12-runner-custom-image.yaml":                  {"1:"},
		"13-runner-k8s-container-mode.yaml":            {"1:"},
		"18-runnerdeployment-group-only.yaml":          {"1:"},
		"19-runnerdeployment-entrypoint-env.yaml":      {"1:"},
		"21-runnerdeployment-ramdisk-fragment.yaml":    {"1:spec.template.spec.emphemeral", "1:"},
		"22-runnerdeployment-env-int-value.yaml":       {"1:"},
		"23-runnerdeployment-windows.yaml":             {`1:spec.template.spec.nodeSelector["kubernetes.io/os"]`, "1:"},
		"26-runnerset-docker-cache-fragment.yaml":      {"1:"},
		"27-rd-hra-percentage-busy-anti-flapping.yaml": {"2:spec.metrics[0]"},
		"28-rd-hra-total-queued-workflow-runs.yaml":    {"2:spec.metrics[0]"},
		"29-hra-empty-metrics-missing-target.yaml":     {"1:"},
		"30-hra-percentage-busy-factors.yaml":          {"1:"},
		"32-rd-hra-workflow-job-v022-fragment.yaml":    {"2:spec.maxReplicas"},
		"34-rd-hra-check-run-org-fragment.yaml":        {"2:spec.scaleUpTriggers[0].githubEvent.checkRun"},
		"35-rd-hra-pull-request-fragment.yaml":         {"2:spec.scaleUpTriggers[0].githubEvent.pullRequest"},
		"36-rd-hra-push-fragment.yaml":                 {"1:spec.repository", "1:", "2:spec.scaleUpTriggers[0].githubEvent.push"},
		"37-hra-scheduled-override-one-off.yaml":       {"1:"},
		"39-contrib-chart-list-percentage-busy.yaml":   {"1:items[1].spec.metrics[0]"},
	}
	for file, want := range must {
		res, err := arcimport.Convert([]arcimport.Source{source(t, "testdata/arc-manifests/examples/"+file)}, arcimport.Options{RunnerImage: "runner:1"})
		if err != nil {
			t.Fatal(err)
		}
		if want == nil && len(res.Dropped) > 0 {
			t.Errorf("%s: %d things not carried, want none: %v", file, len(res.Dropped), res.Dropped)
		}
		var got []string
		for _, d := range res.Dropped {
			got = append(got, strings.TrimPrefix(d.String(), file+": document "))
		}
		for _, w := range want {
			if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, strings.Replace(w, ":", ": ", 1)) }) {
				t.Errorf("%s: %q not reported; reported:\n%s", file, w, strings.Join(got, "\n"))
			}
		}
	}
}

// TestWholeCorpusAtOnce: the examples as one input (a directory) pair each
// autoscaler with the target of its own file first, give every pool a name of
// its own, and load.
func TestWholeCorpusAtOnce(t *testing.T) {
	files, err := filepath.Glob("testdata/arc-manifests/examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sources []arcimport.Source
	for _, f := range files {
		sources = append(sources, source(t, f))
	}
	res, err := arcimport.Convert(sources, arcimport.Options{RunnerImage: "runner:1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := loads(t, res.Pools)
	// 27 and 28 both name their deployment example-runner-deployment: each
	// keeps its own autoscaler (27's delay is 300 s, 28 has none).
	for _, want := range []struct {
		pool  string
		delay int
	}{{"example-runner-deployment", 300}, {"example-runner-deployment-2", 600}} {
		p := cfg.Pool(want.pool)
		if p == nil || int(p.ScaleDownDelay().Seconds()) != want.delay {
			t.Errorf("pool %s: %+v, want scale-down delay %d s", want.pool, p, want.delay)
		}
	}
	if len(cfg.Pools) != 17 {
		t.Errorf("%d pools from the examples, want 17: %v", len(cfg.Pools), res.Names)
	}
}

// corpusName is a corpus file's name in test names and golden files: its path
// under testdata/arc-manifests, or under testdata/ for scale sets.
func corpusName(file string) string {
	if rel, ok := strings.CutPrefix(file, "testdata/arc-manifests/"); ok {
		return rel
	}
	return strings.TrimPrefix(file, "testdata/")
}
