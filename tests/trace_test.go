package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// tracePools overlap on purpose. lin has no label of its own and its pods never
// start, so only another pool's runner can run its job; ml's group admits
// acme/ml only; big (maxReplicas 1) spills to spare. Every pool's runners also
// carry the implied self-hosted and linux labels.
const tracePools = `
pools:
  - name: lin
    organization: acme
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[3]s}
  - name: ml
    organization: acme
    group: ml
    labels: [big]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
  - name: big
    organization: acme
    labels: [big]
    maxReplicas: 1
    overflowTo: spare
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
  - name: spare
    organization: acme
    labels: [big]
    maxReplicas: 3
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`

// TestTraceOfEveryWait: one trace with overlapping labels, an approval, a
// restricted group and a saturated pool. A linux job routed to lin (whose
// runners never start) is taken by a runner of another pool; three acme/app
// big jobs skip ml (its group refuses acme/app) for big, which is saturated and
// spills them to spare; an acme/ml big job runs on ml; an acme/app big job
// waits for its environment's approval. While they wait, status explains each
// wait (the job counted in the runner's pool, the spills of the saturated
// pool, the approval), and the webhook counts ml's refusals. Then every job starts
// and succeeds — each on a runner of a pool that may take it — and nothing is
// left.
func TestTraceOfEveryWait(t *testing.T) {
	t.Parallel()
	metrics := &logBuffer{}
	w := newWorldWith(t, tracePools, loop.Options{SweepEvery: time.Second, WebhookMetrics: metrics},
		loop.RunnerTemplate, pendingTemplate)
	acme := scope.Scope{Organization: "acme"}
	w.loop.Sim.AddGroup(acme, "ml", []string{"acme/ml"})
	w.waitForGroupAccess(acme, "ml")

	spec := func(repo string, d time.Duration, labels ...string) githubsim.JobSpec {
		return githubsim.JobSpec{Repository: repo, Organization: "acme", Labels: append([]string{"self-hosted"}, labels...), Duration: d}
	}
	lin := w.loop.Sim.QueueJob(spec("acme/app", 30*time.Second, "linux")) // the oldest: the first runner online takes it
	var bigs []githubsim.Job
	for range 3 {
		bigs = append(bigs, w.loop.Sim.QueueJob(spec("acme/app", 20*time.Second, "big")))
	}
	ml := w.loop.Sim.QueueJob(spec("acme/ml", 5*time.Second, "big"))
	gated := w.loop.Sim.QueueJobForApproval(spec("acme/app", 5*time.Second, "big"), "production")

	w.statusExplainsEveryWait(lin.ID, gated.ID)
	if err := w.loop.Sim.Approve(gated.ID); err != nil {
		t.Fatal(err)
	}
	w.waitFor("every job completed", 4*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	for _, j := range w.loop.Sim.Jobs() {
		want := []string{"big-", "spare-"} // acme/app big jobs, and the linux job: ml refuses acme/app, lin never starts
		if j.ID == ml.ID {
			want = []string{"ml-"}
		}
		if j.Conclusion != githubsim.JobSuccess || !hasAnyPrefix(j.RunnerName, want) {
			t.Errorf("job %d (%s %v) ended %s on %q, want success on a runner of %v", j.ID, j.Repository, j.Labels, j.Conclusion, j.RunnerName, want)
		}
	}
	var refused []string
	for _, l := range metrics.matching([]string{"JobsRefusedByGroup"}, 1000) {
		if strings.Contains(l, `"Pool":"ml"`) {
			refused = append(refused, l)
		}
	}
	if len(refused) < len(bigs) {
		t.Errorf("%d JobsRefusedByGroup records for ml, want one for each of the %d acme/app big jobs at least: %v", len(refused), len(bigs), refused)
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noJobCountedTwiceOrNowhere()
	w.noViolations()
}

// waitForGroupAccess waits until the sweeper has read the group's access, so
// that routing checks it.
func (w *world) waitForGroupAccess(sc scope.Scope, group string) {
	w.t.Helper()
	access := groupaccess.NewStore(w.db, w.table)
	w.waitFor("the sweeper read group "+group, time.Minute, func() bool {
		a, ok, err := access.Get(w.t.Context(), sc, group)
		if err != nil {
			w.t.Fatal(err)
		}
		return ok && a.Visibility == groupaccess.Selected
	})
}

// statusExplainsEveryWait polls `runnerscaler status` until it has shown each
// wait of the trace at least once: the linux job counted in the pool whose
// runner runs it, a job spilled from big to spare (big's saturation: its
// sweep spills the excess at once, so big itself stays within maxReplicas),
// and the gated job waiting for approval (which it keeps showing until
// approved).
func (w *world) statusExplainsEveryWait(lin, gated int64) {
	w.t.Helper()
	g := w.gatherer()
	seen, shown := map[string]bool{}, 0
	want := []string{"linux job counted where it runs", "spill from big to spare", "approval"}
	w.waitFor("status explaining every wait", 3*time.Minute, func() bool {
		r, err := g.Report(w.t.Context(), "")
		if err != nil {
			w.t.Fatal(err)
		}
		var out strings.Builder
		if err := status.RenderReport(&out, r); err != nil {
			w.t.Fatal(err)
		}
		text := out.String()
		for _, p := range r.Pools {
			for _, m := range p.Moves {
				if m.Job == lin && m.Direction == status.MovedHere && strings.Contains(text, m.Text) {
					seen[want[0]] = true
				}
				if m.Reason == status.MovedBySpill && m.Home == "big" && m.CountedIn == "spare" && strings.Contains(text, m.Text) {
					seen[want[1]] = true
				}
			}
			if p.Name == "big" && len(p.WaitingForApproval) == 1 && p.WaitingForApproval[0].ID == gated &&
				strings.Contains(text, "WAITING FOR APPROVAL") {
				seen[want[2]] = true
			}
		}
		if len(seen) != shown {
			shown = len(seen)
			w.t.Logf("status has explained %v of %v", seen, want)
		}
		return len(seen) == len(want)
	})
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
