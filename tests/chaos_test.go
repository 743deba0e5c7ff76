package tests

import (
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/testenv"

	"github.com/runnerscaler/runnerscaler/local/loop"
)

// TestChaos runs a job stream through the closed loop while deliveries are lost
// (20%), duplicated (20%) and delayed/reordered (up to 300 ms), 15% of sweeper
// invocations are killed at a random point, 5% of the sweeper's Kubernetes writes
// fail, and GitHub answers some API calls with 502 or a secondary rate limit:
// every job must complete, no pod may be deleted under a running job, no job may
// wait over a minute while its pool has room, and nothing may be left at the end. `make test` runs 60 jobs; `make chaos` runs
// RUNNERSCALER_CHAOS_JOBS (1,000).
func TestChaos(t *testing.T) {
	t.Parallel()
	jobs := 60
	if v, err := strconv.Atoi(os.Getenv("RUNNERSCALER_CHAOS_JOBS")); err == nil && v > 0 {
		jobs = v
	}
	kubeFaults := &faultyKube{rate: 0.05}
	rc := testenv.RESTConfig(t)
	rc.Wrap(kubeFaults.wrap)
	sweeperKube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	// A job whose queued delivery is lost twice waits for two recovery rounds: the
	// wait bound is a minute here.
	w := newWorld(t, chaosPools, loop.Options{SweepEvery: time.Second, Lease: 3 * time.Second, SweeperKube: sweeperKube, Log: debugLog(t),
		WaitBound: time.Minute,
		Chaos:     loop.Chaos{Drop: 0.2, Duplicate: 0.2, Delay: 300 * time.Millisecond, KillSweeps: 0.15}})
	const rate = 3.0 // jobs per second: what the pools sustain with these faults
	stream := loop.Generate(w.cfg, jobs, rate, 100*time.Millisecond, 600*time.Millisecond, uint64(time.Now().UnixNano()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.loop.Play(t.Context(), stream)
	}()
	injected, secondary := 0, 0
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	limit := time.Now().Add(time.Duration(float64(jobs)/rate*float64(time.Second)) + 3*time.Minute)
	for !allDone(w.loop.Sim.Jobs()) || len(w.loop.Sim.Jobs()) < jobs {
		if time.Now().After(limit) {
			t.Fatalf("jobs %v not all done; faults %+v, violations %v", summary(w.loop.Sim.Jobs()), w.loop.Faults(), w.loop.Monitor.Violations())
		}
		select {
		case <-tick.C:
			w.loop.Sim.InjectStatus(502, 2)
			injected += 2
			if injected%10 == 0 {
				w.loop.Sim.InjectSecondaryLimit(2 * time.Second)
				secondary++
			}
		case <-time.After(100 * time.Millisecond):
		}
	}
	<-done
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	f := w.loop.Faults()
	t.Logf("%d jobs run; faults: %d deliveries lost, %d duplicated, %d delayed, %d sweeper invocations killed, "+
		"%d Kubernetes writes failed, %d GitHub 502s, %d secondary rate limits; wait p50 %s p95 %s",
		jobs, f.Dropped, f.Duplicated, f.Delayed, f.KilledSweeps, kubeFaults.failed.Load(), injected, secondary,
		loop.Percentile(w.loop.Waits(), 50).Round(time.Millisecond), loop.Percentile(w.loop.Waits(), 95).Round(time.Millisecond))
	if v := w.loop.Monitor.Violations(); len(v) > 0 {
		t.Fatalf("invariant violations: %v", v)
	}
	if f.Dropped == 0 || f.Duplicated == 0 || f.KilledSweeps == 0 || kubeFaults.failed.Load() == 0 {
		t.Fatalf("faults %+v: the run injected no loss or duplication, so it proves nothing", f)
	}
}

// faultyKube fails a fraction of mutating requests, as a flaky API server would.
type faultyKube struct {
	rate   float64
	failed atomic.Int64
}

func (f *faultyKube) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && mrand.Float64() < f.rate {
			f.failed.Add(1)
			return nil, fmt.Errorf("injected failure of %s %s", req.Method, req.URL.Path)
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

const chaosPools = `
pools:
  - name: small
    organization: acme
    labels: [small]
    maxReplicas: 12
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
  - name: big
    organization: acme
    labels: [big]
    maxReplicas: 8
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`
