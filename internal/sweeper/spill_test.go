package sweeper_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// spillPools: a (max 1) spills to b (max 1), which spills to c; b and c take
// a's jobs (organization org, label x), web's jobs only c takes.
const spillPools = `
pools:
  - name: a
    organization: org
    labels: [x]
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 0
    overflowTo: b
    kubernetes: {namespace: ns, image: runner:1}
  - name: b
    organization: org
    labels: [x]
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 0
    overflowTo: c
    kubernetes: {namespace: ns, image: runner:1}
  - name: c
    organization: org
    labels: [x, web]
    maxReplicas: 5
    scaleDownDelaySecondsAfterScaleOut: 0
    kubernetes: {namespace: ns, image: runner:1}
`

type spillEnv struct {
	sweeper *sweeper.Sweeper
	rs      *reservation.Store
	status  *poolstate.Store
	clock   *clocktesting.FakeClock
	metrics *bytes.Buffer
}

func newSpillEnv(t *testing.T) *spillEnv {
	t.Helper()
	cfg, err := pool.Parse([]byte(spillPools))
	if err != nil {
		t.Fatal(err)
	}
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakeClock(t0)
	e := &spillEnv{rs: reservation.New(db, name, clk), status: poolstate.NewStore(db, name), clock: clk, metrics: &bytes.Buffer{}}
	metrics, err := emf.NewWriter(e.metrics, "")
	if err != nil {
		t.Fatal(err)
	}
	e.sweeper, err = sweeper.New(cfg, e.rs, e.status, newLeases(t, db, name, clk), nil, clk, nil, sweeper.Options{Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// queue records a queued job of org/app in a, a second after the last.
func (e *spillEnv) queue(t *testing.T, job int64, labels ...string) {
	t.Helper()
	e.clock.Step(time.Second)
	d := reservation.Delivery{Pool: "a", JobID: job, Repository: "org/app", State: reservation.Queued, Amount: 1,
		Duration: 10 * time.Minute, Labels: labels, Organization: "org"}
	if _, err := e.rs.Record(t.Context(), d); err != nil {
		t.Fatal(err)
	}
}

func (e *spillEnv) deliver(t *testing.T, job int64, s reservation.State) {
	t.Helper()
	if _, err := e.rs.Record(t.Context(), reservation.Delivery{Pool: "a", JobID: job, Repository: "org/app", State: s,
		Amount: 1, Duration: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
}

func (e *spillEnv) nudge(t *testing.T, pool string) {
	t.Helper()
	if _, err := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: pool}); err != nil {
		t.Fatal(err)
	}
}

// desired is each pool's last decided count, a, b, c.
func (e *spillEnv) desired(t *testing.T) []int {
	t.Helper()
	var out []int
	for _, p := range []string{"a", "b", "c"} {
		st, err := e.status.Get(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, st.Desired)
	}
	return out
}

func (e *spillEnv) wantDesired(t *testing.T, when string, want ...int) {
	t.Helper()
	if got := e.desired(t); !slices.Equal(got, want) {
		t.Fatalf("%s: desired a, b, c = %v, want %v", when, got, want)
	}
}

// TestSaturatedPoolSpills: with a at maxReplicas, a nudge of a moves its
// newest queued job to b, sweeps b, which is saturated in turn and moves its
// newest on to c; each pool then wants one runner, and a job moved away is
// not moved back, nor counted twice, when a frees up. JobsSpilled counts the
// moves of a and of b.
func TestSaturatedPoolSpills(t *testing.T) {
	t.Parallel()
	e := newSpillEnv(t)
	e.queue(t, 1, "self-hosted", "x")
	e.queue(t, 2, "self-hosted", "x")
	e.queue(t, 3, "x")
	e.nudge(t, "a")
	e.wantDesired(t, "three jobs for a", 1, 1, 1)
	for pool, want := range map[string]int64{"a": 1, "b": 2, "c": 3} {
		rs, err := e.rs.Active(t.Context(), pool)
		if err != nil || len(rs) != 1 || rs[0].JobID != want {
			t.Fatalf("Active(%s) = %+v, %v; want job %d", pool, rs, err, want)
		}
	}
	e.deliver(t, 1, reservation.InProgress)
	e.deliver(t, 1, reservation.Completed)
	e.clock.Step(time.Second)
	for _, p := range []string{"a", "b", "c"} {
		e.nudge(t, p)
	}
	e.wantDesired(t, "a's job completed", 0, 1, 1)
	var spilled []string
	for _, line := range bytes.Split(bytes.TrimSpace(e.metrics.Bytes()), []byte("\n")) {
		var rec struct {
			Pool        string
			JobsSpilled *float64
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("metric line %s: %v", line, err)
		}
		if rec.JobsSpilled != nil {
			spilled = append(spilled, rec.Pool)
		}
	}
	if !slices.Equal(spilled, []string{"a", "b"}) {
		t.Fatalf("JobsSpilled written for %v, want a then b:\n%s", spilled, e.metrics.String())
	}
}

// TestJobsTheOverflowPoolDoesNotTakeStay: a job without labels (recorded by
// an older webhook), and one whose labels b lacks, stay in saturated a.
func TestJobsTheOverflowPoolDoesNotTakeStay(t *testing.T) {
	t.Parallel()
	e := newSpillEnv(t)
	e.queue(t, 1, "x", "web")
	e.queue(t, 2)
	e.queue(t, 3, "x", "web")
	e.nudge(t, "a")
	e.wantDesired(t, "nothing b takes", 1, 0, 0)
	if rs, err := e.rs.Active(t.Context(), "a"); err != nil || len(rs) != 3 {
		t.Fatalf("Active(a) = %+v, %v; want all three", rs, err)
	}
}
