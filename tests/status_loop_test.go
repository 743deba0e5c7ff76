package tests

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/status/gather"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestStatusTracesLoopJobsToTheirRunners: in the closed loop (the simulator's
// own in_progress and completed deliveries, real runner pods), every job the
// status command traces names the runner the Actions service says ran it.
func TestStatusTracesLoopJobsToTheirRunners(t *testing.T) {
	t.Parallel()
	img := image(t)
	db, tableName := testenv.Table(t)
	kube, ns := testenv.Namespace(t)
	cfg, err := pool.Parse(fmt.Appendf(nil, `
pools:
  - name: traced
    organization: acme
    labels: [traced]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, ns, loop.RunnerTemplate(img)))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := debugLog(t)
	l, err := loop.Start(t.Context(), loop.Options{Pools: cfg, DB: db, Table: tableName, Kube: kube, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	apispec.Verify(t, l.Sim)
	t.Cleanup(func() { releasePods(kube, ns) })
	t.Cleanup(l.Stop)
	w := &world{t: t, loop: l, kube: kube, ns: ns, cfg: cfg, image: img, logs: logs}
	w.queue(3, time.Second, "traced")
	w.waitFor("every job completed", 3*time.Minute, func() bool { return allDone(l.Sim.Jobs()) })

	clk := clock.RealClock{}
	g := gather.New(cfg, reservation.New(db, tableName, clk), poolstate.NewStore(db, tableName),
		redeliver.NewStore(db, tableName), kube, clk)
	for _, j := range l.Sim.Jobs() {
		// The completed delivery may still be on its way.
		w.waitFor(fmt.Sprintf("job %d traced as completed", j.ID), 30*time.Second, func() bool {
			tr, err := g.Trace(t.Context(), j.ID)
			return err == nil && tr.Job.State == "completed"
		})
		tr, err := g.Trace(t.Context(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Job.Pool != "traced" || tr.Job.RunnerName != j.RunnerName || tr.Job.RunnerID != j.RunnerID || j.RunnerName == "" {
			t.Errorf("job %d traced to runner %q (%d) in pool %q; the Actions service ran it on %q (%d)",
				j.ID, tr.Job.RunnerName, tr.Job.RunnerID, tr.Job.Pool, j.RunnerName, j.RunnerID)
		}
		if len(tr.Job.Deliveries) == 0 || tr.Job.Deliveries[len(tr.Job.Deliveries)-1].State != "completed" {
			t.Errorf("job %d deliveries %+v, want the completed one last", j.ID, tr.Job.Deliveries)
		}
	}
}
