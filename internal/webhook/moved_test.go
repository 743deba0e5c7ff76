package webhook_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
)

// elasticTakesOctosJobs is pools with elastic in octo's organization, its
// labels a superset of octo's: its runners can take octo's jobs.
var elasticTakesOctosJobs = strings.Replace(pools, "repository: lineville/elastic-machines-testing\n    labels: [k8s]",
	"organization: Octocoders\n    labels: [ubuntu-latest, k8s]", 1)

// TestJobOnAnotherPoolsRunnerMovesItsCount: a job routed to octo that a runner
// of elastic takes is counted in elastic from its in_progress on, and no longer
// in octo; the move nudges elastic (for a runner for the job its runner was
// made for) and writes one JobsOnAnotherPoolsRunner under elastic. A redelivery
// moves nothing, nudges nobody and writes no second metric.
func TestJobOnAnotherPoolsRunnerMovesItsCount(t *testing.T) {
	t.Parallel()
	e, h, out := movingHandler(t, elasticTakesOctosJobs)
	queued, inProgress := onRunnerOf(t, e, "elastic")
	for _, body := range [][]byte{queued, inProgress, inProgress} {
		if resp := h.Serve(t.Context(), headersFor("workflow_job", body), body); resp.Status != 200 {
			t.Fatalf("delivery: %d %s", resp.Status, resp.Reason)
		}
	}
	const job = 289782451
	if rs, err := e.store.Active(t.Context(), "octo"); err != nil || len(rs) != 0 {
		t.Fatalf("octo counts %+v, %v; want nothing", rs, err)
	}
	if rs, err := e.store.Active(t.Context(), "elastic"); err != nil || len(rs) != 1 || rs[0].JobID != job || rs[0].Pool != "octo" {
		t.Fatalf("elastic counts %+v, %v; want job %d of octo", rs, err, job)
	}
	want := []sweepevent.Event{{Pool: "octo", Jobs: []int64{job}}, {Pool: "elastic"}}
	if !slices.EqualFunc(e.nudger.events, want, func(a, b sweepevent.Event) bool {
		return a.Pool == b.Pool && slices.Equal(a.Jobs, b.Jobs) && slices.Equal(a.Finished, b.Finished)
	}) {
		t.Fatalf("nudges %+v, want %+v", e.nudger.events, want)
	}
	var moved []string
	for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var rec struct {
			Pool                     string
			JobsOnAnotherPoolsRunner *float64
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("metric line %s: %v", line, err)
		}
		if rec.JobsOnAnotherPoolsRunner != nil && *rec.JobsOnAnotherPoolsRunner == 1 {
			moved = append(moved, rec.Pool)
		}
	}
	if !slices.Equal(moved, []string{"elastic"}) {
		t.Fatalf("JobsOnAnotherPoolsRunner written for %v, want once for elastic:\n%s", moved, out.String())
	}
}

// TestSpilledJobOnItsOwnPoolsRunnerComesHome: a job of octo spilled to
// elastic that a runner of octo takes anyway is counted in octo again, and no
// JobsOnAnotherPoolsRunner is written: the runner is its own pool's.
func TestSpilledJobOnItsOwnPoolsRunnerComesHome(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(strings.Replace(pools, "labels: [ubuntu-latest]\n", "labels: [ubuntu-latest]\n    overflowTo: elastic\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, cfg, secret)
	var out bytes.Buffer
	metrics, err := emf.NewWriter(&out, "")
	if err != nil {
		t.Fatal(err)
	}
	h := webhook.New([]byte(secret), cfg, e.store, webhook.WithNudger(e.nudger), webhook.WithMetrics(metrics), webhook.WithRoster(e.roster))
	queued := fixture(t, "workflow_job/queued.payload.json")
	if resp := h.Serve(t.Context(), headersFor("workflow_job", queued), queued); resp.Status != 200 {
		t.Fatalf("queued: %d %s", resp.Status, resp.Reason)
	}
	rs, err := e.store.Active(t.Context(), "octo")
	if err != nil || len(rs) != 1 {
		t.Fatalf("Active(octo) = %+v, %v", rs, err)
	}
	if moved, err := e.store.Spill(t.Context(), rs[0], "octo", "elastic"); err != nil || !moved {
		t.Fatalf("Spill = %v, %v", moved, err)
	}
	runner := runnername.Pod(runnername.New("octo"))
	e.enrol(t, "octo", runner)
	inProgress := []byte(strings.Replace(string(fixture(t, "workflow_job/in_progress.payload.json")),
		`"runner_name": "GitHub Actions 5"`, `"runner_name": "`+runner+`"`, 1))
	if resp := h.Serve(t.Context(), headersFor("workflow_job", inProgress), inProgress); resp.Status != 200 {
		t.Fatalf("in_progress: %d %s", resp.Status, resp.Reason)
	}
	if rs, err := e.store.Active(t.Context(), "octo"); err != nil || len(rs) != 1 || rs[0].Moved() {
		t.Fatalf("octo counts %+v, %v; want its job, at home", rs, err)
	}
	if rs, err := e.store.Active(t.Context(), "elastic"); err != nil || len(rs) != 0 {
		t.Fatalf("elastic counts %+v, %v; want nothing", rs, err)
	}
	if strings.Contains(out.String(), "JobsOnAnotherPoolsRunner") {
		t.Fatalf("a job on its own pool's runner was counted as on another pool's:\n%s", out.String())
	}
}

// TestRunnerNamedLikeAPoolThatCannotTakeTheJobMovesNothing: an in_progress
// whose runner is named like elastic's, a pool of another repository whose
// runners GitHub never gives a job of octo's organization, moves nothing: the
// runner is not ours, octo keeps counting its job, and elastic is neither
// counted the job nor nudged to make a runner for it.
func TestRunnerNamedLikeAPoolThatCannotTakeTheJobMovesNothing(t *testing.T) {
	t.Parallel()
	e, h, out := movingHandler(t, pools)
	queued, inProgress := onRunnerOf(t, e, "elastic")
	for _, body := range [][]byte{queued, inProgress} {
		if resp := h.Serve(t.Context(), headersFor("workflow_job", body), body); resp.Status != 200 {
			t.Fatalf("delivery: %d %s", resp.Status, resp.Reason)
		}
	}
	const job = 289782451
	if rs, err := e.store.Active(t.Context(), "octo"); err != nil || len(rs) != 1 || rs[0].JobID != job || rs[0].Moved() {
		t.Fatalf("octo counts %+v, %v; want its job %d, at home", rs, err, job)
	}
	if rs, err := e.store.Active(t.Context(), "elastic"); err != nil || len(rs) != 0 {
		t.Fatalf("elastic counts %+v, %v; want nothing", rs, err)
	}
	if slices.Contains(e.nudger.pools, "elastic") {
		t.Fatalf("elastic was nudged: %+v", e.nudger.events)
	}
	if strings.Contains(out.String(), "JobsOnAnotherPoolsRunner") {
		t.Fatalf("a runner that is not elastic's was counted as elastic's:\n%s", out.String())
	}
}

// movingHandler is a handler of poolsYAML that nudges and writes metrics (to out).
func movingHandler(t *testing.T, poolsYAML string) (*env, *webhook.Handler, *bytes.Buffer) {
	t.Helper()
	cfg, err := pool.Parse([]byte(poolsYAML))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, cfg, secret)
	out := &bytes.Buffer{}
	metrics, err := emf.NewWriter(out, "")
	if err != nil {
		t.Fatal(err)
	}
	return e, webhook.New([]byte(secret), cfg, e.store, webhook.WithNudger(e.nudger), webhook.WithMetrics(metrics),
		webhook.WithRoster(e.roster)), out
}

// onRunnerOf is GitHub's queued delivery of a job and its in_progress on a
// runner of the pool (on e's roster).
func onRunnerOf(t *testing.T, e *env, pool string) (queued, inProgress []byte) {
	t.Helper()
	queued, inProgress = onRunnerNamedLike(t, pool)
	e.enrol(t, pool, runnerOf(t, inProgress))
	return queued, inProgress
}

// onRunnerNamedLike is GitHub's queued delivery of a job and its in_progress
// on a runner named like the pool's.
func onRunnerNamedLike(t *testing.T, pool string) (queued, inProgress []byte) {
	t.Helper()
	runner := runnername.Pod(runnername.New(pool))
	queued = fixture(t, "workflow_job/queued.payload.json")
	inProgress = []byte(strings.Replace(string(fixture(t, "workflow_job/in_progress.payload.json")),
		`"runner_name": "GitHub Actions 5"`, `"runner_name": "`+runner+`"`, 1))
	return queued, inProgress
}

// runnerOf is the runner_name of a workflow_job delivery.
func runnerOf(t *testing.T, body []byte) string {
	t.Helper()
	var p struct {
		WorkflowJob struct {
			RunnerName string `json:"runner_name"`
		} `json:"workflow_job"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	return p.WorkflowJob.RunnerName
}

// TestRunnerOfAnotherDeploymentMovesNothing: an in_progress on a runner named
// like elastic's that is on no roster of this deployment (another deployment
// with the same pool names in the organization) moves nothing, links nothing
// and nudges nobody: octo keeps counting its job.
func TestRunnerOfAnotherDeploymentMovesNothing(t *testing.T) {
	t.Parallel()
	e, h, out := movingHandler(t, elasticTakesOctosJobs)
	queued, inProgress := onRunnerNamedLike(t, "elastic")
	for _, body := range [][]byte{queued, inProgress} {
		if resp := h.Serve(t.Context(), headersFor("workflow_job", body), body); resp.Status != 200 {
			t.Fatalf("delivery: %d %s", resp.Status, resp.Reason)
		}
	}
	const job = 289782451
	if rs, err := e.store.Active(t.Context(), "octo"); err != nil || len(rs) != 1 || rs[0].JobID != job || rs[0].Moved() {
		t.Fatalf("octo counts %+v, %v; want its job %d, at home", rs, err, job)
	}
	if rs, err := e.store.Active(t.Context(), "elastic"); err != nil || len(rs) != 0 {
		t.Fatalf("elastic counts %+v, %v; want nothing", rs, err)
	}
	if links, err := e.store.RunnerJobs(t.Context(), runnerOf(t, inProgress)); err != nil || len(links) != 0 {
		t.Fatalf("links of the other deployment's runner: %+v, %v; want none", links, err)
	}
	if slices.Contains(e.nudger.pools, "elastic") || strings.Contains(out.String(), "JobsOnAnotherPoolsRunner") {
		t.Fatalf("the other deployment's runner was taken for elastic's: nudges %+v, metrics %s", e.nudger.events, out.String())
	}
}
