package webhook

import (
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
)

const planPools = `
pools:
  - name: linux
    organization: acme
    labels: [linux]
    maxReplicas: 5
    overflowTo: big
    kubernetes: {namespace: runners, image: runner:1}
  - name: big
    organization: acme
    labels: [linux, big]
    maxReplicas: 5
    kubernetes: {namespace: runners, image: runner:1}
  - name: solo
    organization: acme
    labels: [solo]
    maxReplicas: 5
    kubernetes: {namespace: runners, image: runner:1}
`

// TestPlan: what a delivery writes and whom it nudges, decided from its facts
// alone — for each state, on no runner, a runner of its pool, of another pool
// and of no pool of the deployment.
func TestPlan(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(planPools))
	if err != nil {
		t.Fatal(err)
	}
	linux, big, solo := cfg.Pool("linux"), cfg.Pool("big"), cfg.Pool("solo")
	j := func(labels ...string) job {
		return job{id: 7, runID: 70, runAttempt: 1, route: pool.Job{Repository: "acme/app", Organization: "acme", Labels: labels},
			runnerName: "r-0", conclusion: "failure", started: time.Unix(100, 0), completed: time.Unix(200, 0)}
	}
	type want struct {
		pool, runnerPool, nudge string
		link, failure, unrouted bool
		follow                  bool
		followNudge             string
		queueWait               bool
	}
	for _, tc := range []struct {
		name string
		f    facts
		want want
	}{
		{"queued, routed", facts{job: j("self-hosted", "linux"), state: reservation.Queued, pool: linux},
			want{pool: "linux", nudge: "linux"}},
		{"queued for a self-hosted runner no pool takes", facts{job: j("self-hosted", "gpu"), state: reservation.Queued, why: "no pool"},
			want{unrouted: true}},
		{"queued for a hosted runner", facts{job: j("ubuntu-latest"), state: reservation.Queued, why: "no pool"}, want{}},
		{"waiting no pool takes", facts{job: j("self-hosted", "gpu"), state: reservation.Waiting, why: "no pool"}, want{}},
		{"in_progress on a runner of no pool of ours", facts{job: j("self-hosted", "linux"), state: reservation.InProgress, pool: linux},
			want{pool: "linux", queueWait: true}},
		{"in_progress on its pool's runner", facts{job: j("self-hosted", "solo"), state: reservation.InProgress, pool: solo, runnerPool: solo},
			want{pool: "solo", runnerPool: "solo", link: true, queueWait: true}},
		{"in_progress on its own pool's runner, spilled maybe", facts{job: j("self-hosted", "linux"), state: reservation.InProgress,
			pool: linux, runnerPool: linux}, want{pool: "linux", runnerPool: "linux", link: true, follow: true, followNudge: "linux", queueWait: true}},
		{"in_progress on another pool's runner that takes it", facts{job: j("self-hosted", "linux", "big"), state: reservation.InProgress,
			pool: linux, runnerPool: big}, want{pool: "linux", runnerPool: "big", link: true, follow: true, followNudge: "big", queueWait: true}},
		{"in_progress on a runner of a pool that cannot take it", facts{job: j("self-hosted", "big"), state: reservation.InProgress,
			pool: big, runnerPool: solo}, want{pool: "big", runnerPool: "solo", link: true, queueWait: true}},
		{"completed, failed, on another pool's runner", facts{job: j("self-hosted", "linux", "big"), state: reservation.Completed,
			pool: linux, runnerPool: big}, want{pool: "linux", runnerPool: "big", link: true, failure: true, follow: true, nudge: "big"}},
		{"completed on its own pool's runner", facts{job: j("self-hosted", "linux"), state: reservation.Completed, pool: linux, runnerPool: linux},
			want{pool: "linux", runnerPool: "linux", link: true, failure: true, nudge: "linux"}},
		{"completed, unrouted, on one of our runners", facts{job: j("self-hosted", "gpu"), state: reservation.Completed, runnerPool: solo},
			want{runnerPool: "solo", link: true, failure: true, unrouted: true, nudge: "solo"}},
	} {
		dp := plan(tc.f)
		got := want{link: dp.link, failure: dp.failure != nil, unrouted: dp.unrouted != nil, follow: dp.follow, queueWait: dp.queueWait}
		if dp.followNudge != nil {
			got.followNudge = dp.followNudge.Pool
		}
		if dp.pool != nil {
			got.pool = dp.pool.Name
		}
		if dp.runnerPool != nil {
			got.runnerPool = dp.runnerPool.Name
		}
		if dp.nudge != nil {
			got.nudge = dp.nudge.Pool
		}
		if got != tc.want {
			t.Errorf("%s: plan %+v, want %+v", tc.name, got, tc.want)
		}
		if dp.failure != nil && (dp.failure.Pool != got.runnerPool || dp.failure.Runner != "r-0" || dp.failure.StartedMillis != 100_000) {
			t.Errorf("%s: failure %+v, want in the runner's pool, with the job's times", tc.name, *dp.failure)
		}
		if dp.pool != nil && (dp.reservation.Pool != dp.pool.Name || dp.reservation.Amount != 1 || dp.reservation.JobID != 7) {
			t.Errorf("%s: reservation %+v, want job 7 in %s", tc.name, dp.reservation, dp.pool.Name)
		}
	}
}
