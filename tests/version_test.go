package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerversion"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/internal/status/gather"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// metricLines keeps the sweeper's metric lines.
type metricLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (m *metricLines) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.buf.Write(p)
}

// daysLeft is the last RunnerVersionDaysLeft written for each pool.
func (m *metricLines) daysLeft() map[string]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]float64{}
	for line := range strings.Lines(m.buf.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if v, ok := rec[runnerversion.DaysLeftMetric].(float64); ok {
			out[fmt.Sprint(rec["Pool"])] = v
		}
	}
	return out
}

// withRunnerVersion is the runner template of a fake runner that plays
// actions/runner version v (FAKERUNNER_VERSION), as an image built with that
// RUNNER_VERSION would run.
func withRunnerVersion(v string) func(image string) string {
	return func(image string) string {
		var tmpl struct {
			Spec map[string]any `json:"spec"`
		}
		if err := json.Unmarshal([]byte(loop.RunnerTemplate(image)), &tmpl); err != nil {
			panic(err)
		}
		c := tmpl.Spec["containers"].([]any)[0].(map[string]any)
		c["env"] = append(c["env"].([]any), map[string]string{"name": "FAKERUNNER_VERSION", "value": v})
		raw, err := json.Marshal(tmpl)
		if err != nil {
			panic(err)
		}
		return string(raw)
	}
}

// TestOutdatedRunnerVersionIsShown: GitHub published 2.331.0 forty days ago and
// 2.332.0 twenty-five days ago. A pool left on runner/Dockerfile's version
// (2.330.0) gets no job: its runner is refused, and says so in its container's
// termination message; `status` shows the pool refused (0 days left, the metric
// too) and its job still queued, while a pool on 2.331.0 runs its job and is
// shown 4 days from its deadline. The sweeper asked GitHub once.
func TestOutdatedRunnerVersionIsShown(t *testing.T) {
	t.Parallel()
	now := time.Now()
	metrics := &metricLines{}
	db, tableName := testenv.Table(t)
	// The deployment checked daily when 2.331.0 was the latest; its last check
	// was two days ago.
	seen := runnerversion.Known{AttemptedAt: now.Add(-48 * time.Hour), CheckedAt: now.Add(-48 * time.Hour), Releases: []runnerversion.Release{
		{Version: runnerversion.Version{Major: 2, Minor: 331}, PublishedAt: now.Add(-40 * 24 * time.Hour)}}}
	if err := runnerversion.NewStore(db, tableName).Put(t.Context(), seen, time.Time{}); err != nil {
		t.Fatal(err)
	}
	img := image(t)
	kube, ns := testenv.Namespace(t)
	cfg, err := pool.Parse(fmt.Appendf(nil, `
pools:
  - name: pinned
    organization: acme
    labels: [pinned]
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
  - name: upgraded
    organization: acme
    labels: [upgraded]
    runnerVersion: 2.331.0
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[3]s}
`, ns, loop.RunnerTemplate(img), withRunnerVersion("2.331.0")(img)))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := debugLog(t)
	l, err := loop.Start(t.Context(), loop.Options{Pools: cfg, DB: db, Table: tableName, Kube: kube, Log: log,
		SweeperMetrics: metrics, RunnerReleases: []githubsim.RunnerRelease{
			{Version: "2.331.0", PublishedAt: now.Add(-40 * 24 * time.Hour)},
			{Version: "2.332.0", PublishedAt: now.Add(-25*24*time.Hour - time.Hour)}}})
	if err != nil {
		t.Fatal(err)
	}
	apispec.Verify(t, l.Sim)
	t.Cleanup(func() { releasePods(kube, ns) })
	t.Cleanup(l.Stop)
	w := &world{t: t, loop: l, kube: kube, ns: ns, cfg: cfg, image: img, logs: logs, db: db, table: tableName}
	w.queue(1, time.Second, "pinned")
	w.queue(1, time.Second, "upgraded")
	w.waitFor("the upgraded pool's job completed", 3*time.Minute, func() bool {
		for _, j := range w.loop.Sim.Jobs() {
			if j.Labels[1] == "upgraded" {
				return j.State == githubsim.JobCompleted
			}
		}
		return false
	})
	refusal := "runner refused by GitHub: An error occurred: Error: Forbidden Runner version v2.330.0 is deprecated and cannot receive messages."
	w.waitFor("the pinned pool's runner said it was refused", 2*time.Minute, func() bool {
		pods, err := w.kube.CoreV1().Pods(w.ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
					if term != nil && strings.HasPrefix(p.Name, "pinned-") && strings.TrimSpace(term.Message) == refusal {
						return true
					}
				}
			}
		}
		return false
	})
	for _, j := range w.loop.Sim.Jobs() {
		if j.Labels[1] == "pinned" && (j.State != githubsim.JobQueued || j.RunnerName != "") {
			t.Fatalf("the pinned pool's job %d is %s on %q; want it queued: GitHub gives 2.330.0 no job", j.ID, j.State, j.RunnerName)
		}
	}

	g := w.gatherer(gather.WithRunnerReleases(runnerversion.NewStore(w.db, w.table)))
	r, err := g.Report(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]*status.RunnerVersion{}
	queued := map[string]int{}
	for _, p := range r.Pools {
		versions[p.Name], queued[p.Name] = p.RunnerVersion, len(p.Queued)
	}
	if v := versions["pinned"]; v == nil || v.Version != runnerversion.Pinned || v.Stated || v.State != status.VersionRefused ||
		v.DaysLeft != 0 || v.Latest != "2.332.0" || !strings.Contains(v.Reason, "2.331.0 was published") || v.CheckedAt.IsZero() {
		t.Errorf("pinned pool's version %+v; want %s (runner/Dockerfile's) refused since 2.331.0's grace ended", v, runnerversion.Pinned)
	}
	if v := versions["upgraded"]; v == nil || v.Version != "2.331.0" || v.State != status.VersionBehind || v.DaysLeft != 4 || !v.DeadlineExact {
		t.Errorf("upgraded pool's version %+v; want 2.331.0 behind, 4 days left", v)
	}
	if queued["pinned"] != 1 {
		t.Errorf("status shows %d queued jobs in the pinned pool, want its 1", queued["pinned"])
	}
	var out bytes.Buffer
	if err := status.RenderReport(&out, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "RUNNER VERSIONS") || !strings.Contains(out.String(), "upgrade the pool's image") {
		t.Errorf("the report does not say what to do:\n%s", out.String())
	}
	if got := metrics.daysLeft(); got["pinned"] != 0 || got["upgraded"] != 4 || len(got) != 2 {
		t.Errorf("RunnerVersionDaysLeft %v; want pinned 0, upgraded 4", got)
	}
	if n := w.loop.Sim.Calls()["GET /repos/{owner}/{repo}/releases/latest"]; n != 1 {
		t.Errorf("the sweeps asked GitHub for the latest release %d times, want once", n)
	}
}

// TestRunnerReleasesCheckedOnceADayInTheTable: the daily check kept in the
// product's table: a restarted function (a new Checker on the same table)
// asks no sooner than a day after the last attempt, and then conditionally.
func TestRunnerReleasesCheckedOnceADayInTheTable(t *testing.T) {
	t.Parallel()
	db, tableName := testenv.Table(t)
	published := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	sim := githubsim.New(githubsim.Options{PATs: []string{"ghp_releases"}, RunnerReleases: []githubsim.RunnerRelease{{Version: "2.331.0", PublishedAt: published}}})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	apispec.Verify(t, sim)
	gh, err := githubapi.New(githubapi.Config{BaseURL: srv.URL + "/", Auth: githubapi.Auth{Token: "ghp_releases"}})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC))
	store := runnerversion.NewStore(db, tableName)
	for i := range 4 { // four function starts within the day
		k, err := runnerversion.New(store, gh, clk, nil, nil).Refresh(t.Context())
		if err != nil || len(k.Releases) != 1 || k.Releases[0].Version.String() != "2.331.0" || !k.Releases[0].PublishedAt.Equal(published) {
			t.Fatalf("start %d: %+v, %v", i, k, err)
		}
		clk.Step(6*time.Hour - time.Second)
	}
	if n := gh.Stats().Calls; n != 1 {
		t.Fatalf("%d calls within a day across restarts, want 1", n)
	}
	clk.Step(time.Hour)
	k, err := runnerversion.New(store, gh, clk, nil, nil).Refresh(t.Context())
	if err != nil || !k.CheckedAt.Equal(clk.Now()) {
		t.Fatalf("a day later: %+v, %v", k, err)
	}
	if st := gh.Stats(); st.Calls != 2 || st.NotModified != 1 {
		t.Fatalf("a day later: %d calls, %d not modified; want the second one conditional (304)", st.Calls, st.NotModified)
	}
}
