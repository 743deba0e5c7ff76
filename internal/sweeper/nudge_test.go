package sweeper_test

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// laggingIndex is DynamoDB whose active index has not caught up with the writes
// of the hidden jobs (GSI reads are eventually consistent).
type laggingIndex struct {
	*dynamodb.Client
	hidden map[int64]bool
}

func (l laggingIndex) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := l.Client.Query(ctx, in, opts...)
	if err != nil || in.IndexName == nil {
		return out, err
	}
	out.Items = slices.DeleteFunc(out.Items, func(it map[string]types.AttributeValue) bool {
		v, _ := it["jobId"].(*types.AttributeValueMemberN)
		id, _ := strconv.ParseInt(v.Value, 10, 64)
		return l.hidden[id]
	})
	return out, nil
}

// newLaggingEnv is newEnv whose sweeper reads reservations through an index that
// lags behind the given jobs.
func newLaggingEnv(t *testing.T, rec sweeper.Reconciler, hidden ...int64) *env {
	t.Helper()
	cfg, err := pool.Load(filepath.Join("..", "..", "local", "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakeClock(t0)
	lag := laggingIndex{Client: db, hidden: map[int64]bool{}}
	for _, j := range hidden {
		lag.hidden[j] = true
	}
	e := &env{rs: reservation.New(db, name, clk), status: poolstate.NewStore(db, name),
		leases: newLeases(t, db, name, clk), clock: clk}
	if e.sweeper, err = sweeper.New(cfg, reservation.New(lag, name, clk), e.status, e.leases, rec, clk, nil, sweeper.Options{}); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestNudgeCountsItsJobWhileTheIndexLags: the webhook's nudge names its job; the
// sweep it starts counts that job even though the index read does not show it yet.
// A sweep without the job (a scheduled one) counts it once the index catches up.
func TestNudgeCountsItsJobWhileTheIndexLags(t *testing.T) {
	t.Parallel()
	e := newLaggingEnv(t, nil, 1)
	e.queue(t, "octo", 1)
	if _, err := e.invoke(t, []byte(`{"pool":"octo"}`)); err != nil {
		t.Fatal(err)
	}
	if st := e.desired(t, "octo"); st.Desired != 0 {
		t.Fatalf("a sweep without the job saw it through the lagging index: desired %d", st.Desired)
	}
	if _, err := e.invoke(t, []byte(`{"pool":"octo","jobs":[1]}`)); err != nil {
		t.Fatal(err)
	}
	if st := e.desired(t, "octo"); st.Desired != 1 {
		t.Fatalf("the nudge for job 1: desired %d, want 1", st.Desired)
	}
}

// TestHandedOverNudgeKeepsItsJob: a nudge that finds the pool's lease held hands
// its job to the holder with the dirty mark, so the holder's next round counts it
// even though the index read does not show it yet.
func TestHandedOverNudgeKeepsItsJob(t *testing.T) {
	t.Parallel()
	rec := &blockingReconciler{entered: make(chan struct{}), release: make(chan struct{})}
	e := newLaggingEnv(t, rec, 9)
	done := make(chan sweeper.Report)
	go func() {
		r, _ := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: "octo"})
		done <- r
	}()
	<-rec.entered
	e.queue(t, "octo", 9)
	if r, err := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: "octo", Jobs: []int64{9}}); err != nil || !contains(r.Skipped, "octo") {
		t.Fatalf("nudge during the hold: %+v, %v; want skipped (handed over)", r, err)
	}
	close(rec.release)
	if r := <-done; !contains(r.Swept, "octo") {
		t.Fatalf("holder report %+v", r)
	}
	if st := e.desired(t, "octo"); st.Desired != 1 {
		t.Fatalf("octo desired %d after the holder's second round, want 1 (job 9, nudged during the hold)", st.Desired)
	}
}
