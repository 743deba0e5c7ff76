package sweeper_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

// failOnce fails its first reconcile.
type failOnce struct{ calls int }

func (f *failOnce) Reconcile(context.Context, *pool.Pool, scaling.Decision, *poolstate.Status) error {
	f.calls++
	if f.calls == 1 {
		return errors.New("creating statefulset: quota exceeded")
	}
	return nil
}

// TestSweepOutcomeIsRecorded: a failed reconcile leaves the pool status marked
// failed with the error (what `runnerscaler status` shows); the next successful
// sweep clears the mark and keeps the error in the recent ones.
func TestSweepOutcomeIsRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &failOnce{})
	nudge := []byte(`{"pool":"octo"}`)
	if _, err := e.invoke(t, nudge); err == nil {
		t.Fatal("a failed reconcile reported no error")
	}
	st := e.desired(t, "octo")
	if !st.Failed || len(st.Errors) != 1 || !strings.Contains(st.Errors[0].Error, "quota exceeded") || !st.Errors[0].At.Equal(t0) {
		t.Fatalf("after a failed sweep: failed %v, errors %+v", st.Failed, st.Errors)
	}
	if _, err := e.invoke(t, nudge); err != nil {
		t.Fatal(err)
	}
	if st := e.desired(t, "octo"); st.Failed || len(st.Errors) != 1 {
		t.Fatalf("after a good sweep: failed %v, errors %+v; want not failed, the error kept", st.Failed, st.Errors)
	}
}

type redelivering int

func (r redelivering) Recover(context.Context) (redeliver.Undelivered, error) {
	return redeliver.Undelivered{Redelivered: int(r)}, nil
}

// TestRedeliveriesAreCounted: a scheduled sweep writes how many deliveries it had
// redelivered, at the function's log level.
func TestRedeliveriesAreCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var out bytes.Buffer
	metrics, err := emf.NewWriter(&out, "WARN")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.Parse([]byte("pools:\n  - {name: p, organization: o, maxReplicas: 1, kubernetes: {namespace: n, image: i}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sweeper.New(cfg, e.rs, e.status, e.leases, nil, e.clock, nil, sweeper.Options{Recoverer: redelivering(2), Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Handle(t.Context(), sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"}); err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Level        string
		Redeliveries float64
	}
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil {
		t.Fatalf("metric line %q: %v", out.String(), err)
	}
	if rec.Level != "WARN" || rec.Redeliveries != 2 {
		t.Fatalf("metric line %s, want 2 redeliveries at level WARN", out.Bytes())
	}
}

// staleOnce fails its first reconcile with an error it calls retryable (as
// reconcile.Reconciler does for a runner another writer changed), or not.
type staleOnce struct {
	calls     int
	retryable bool
	always    bool // every reconcile fails so
}

var errChanged = errors.New("pod p-abcde-0: changed by another writer since this sweep read it")

func (f *staleOnce) Reconcile(context.Context, *pool.Pool, scaling.Decision, *poolstate.Status) error {
	f.calls++
	if f.calls == 1 || f.always {
		return errChanged
	}
	return nil
}

func (f *staleOnce) Retryable(err error) bool { return f.retryable && errors.Is(err, errChanged) }

// TestStaleSweepIsRunAgainAtOnce: a nudged sweep that fails with an error its
// reconciler calls retryable is run again under the same lease, and the pool
// ends swept (nothing waits for the next nudge or tick); one that is not
// retryable fails and is not run again.
func TestStaleSweepIsRunAgainAtOnce(t *testing.T) {
	t.Parallel()
	for _, retryable := range []bool{true, false} {
		t.Run(map[bool]string{true: "retryable", false: "not retryable"}[retryable], func(t *testing.T) {
			t.Parallel()
			rec := &staleOnce{retryable: retryable}
			e := newEnv(t, rec)
			_, err := e.invoke(t, []byte(`{"pool":"octo"}`))
			st := e.desired(t, "octo")
			switch {
			case retryable && (err != nil || rec.calls != 2 || st.Failed):
				t.Fatalf("error %v, %d reconciles, failed %v; want the sweep run again at once and the pool swept", err, rec.calls, st.Failed)
			case !retryable && (err == nil || rec.calls != 1 || !st.Failed):
				t.Fatalf("error %v, %d reconciles, failed %v; want one failed sweep", err, rec.calls, st.Failed)
			}
		})
	}
	t.Run("stale every time", func(t *testing.T) {
		t.Parallel()
		rec := &staleOnce{retryable: true, always: true}
		e := newEnv(t, rec)
		if _, err := e.invoke(t, []byte(`{"pool":"octo"}`)); err == nil || rec.calls != 3 || !e.desired(t, "octo").Failed {
			t.Fatalf("error %v, %d reconciles; want the sweep run again twice, then failed", err, rec.calls)
		}
	})
}
