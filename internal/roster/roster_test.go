package roster_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestRosterHasWhatTheSweeperAdded: a runner is on its pool's roster once
// added, not on another pool's, and stays on it once retired — off the live
// partition a sweep reads, with a TTL of Linger; retiring a runner never added
// does not put it on the roster. Every read is consistent (ConsistentOnly
// refuses other reads).
func TestRosterHasWhatTheSweeperAdded(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	s := roster.NewStore(testenv.ConsistentOnly(db), name)
	ctx := t.Context()
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	has := func(pool, runner string) bool {
		t.Helper()
		ok, err := s.Has(ctx, pool, runner)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	live := func(pool string) []string {
		t.Helper()
		rs, err := s.Live(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range rs {
			names = append(names, r.Name)
		}
		return names
	}
	if has("linux", "linux-bcdfg-0") {
		t.Fatal("a runner never added is on the roster")
	}
	if err := s.Add(ctx, roster.Runner{Pool: "linux", Name: "linux-bcdfg-0", Namespace: "ci", Scope: "organization/acme"}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, roster.Runner{Pool: "linux", Name: "linux-bcdfg-0"}, now); err == nil {
		t.Fatal("a second Add of the same runner succeeded; want it refused")
	}
	if !has("linux", "linux-bcdfg-0") || has("linux-x", "linux-bcdfg-0") || has("linux", "linux-bcdfh-0") {
		t.Fatal("the roster does not hold exactly the runner added, in its pool")
	}
	if got := live("linux"); !slices.Equal(got, []string{"linux-bcdfg-0"}) {
		t.Fatalf("live runners %v, want the one added", got)
	}
	if err := s.Retire(ctx, "linux", "linux-bcdfg-0", now); err != nil {
		t.Fatal(err)
	}
	if !has("linux", "linux-bcdfg-0") {
		t.Fatal("a retired runner left the roster at once; want it kept for Linger")
	}
	if got := live("linux"); len(got) != 0 {
		t.Fatalf("live runners %v after the retirement, want none", got)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(name), Key: table.Key(table.RetiredRosterPK("linux"), "linux-bcdfg-0")})
	if err != nil {
		t.Fatal(err)
	}
	if got := table.Int(out.Item, table.TTLAttribute); got != now.Add(roster.Linger).Unix() {
		t.Fatalf("retired runner's TTL = %d, want %d (Linger after retirement)", got, now.Add(roster.Linger).Unix())
	}
	e, found, err := s.Lookup(ctx, "linux", "linux-bcdfg-0")
	if err != nil || !found || e.Namespace != "ci" || e.Scope != "organization/acme" || !e.Retired.Equal(now) {
		t.Fatalf("retired runner read back as %+v (found %v, %v); want its namespace, scope and retirement kept", e, found, err)
	}
	if err := s.Retire(ctx, "linux", "linux-ghost-0", now); err != nil || has("linux", "linux-ghost-0") {
		t.Fatalf("retiring a runner never added: %v; want no error and nothing on the roster", err)
	}
}

// TestRecordKeepsTheFirstObjectOfEachKind: the roster records a runner's
// StatefulSet, Secret and GitHub id once — the same value again is accepted,
// another refused (ErrNotRecorded) and the first kept — and every pod UID
// offered; a runner that is not live records nothing.
func TestRecordKeepsTheFirstObjectOfEachKind(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	s := roster.NewStore(testenv.ConsistentOnly(db), name)
	ctx := t.Context()
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	if err := s.Add(ctx, roster.Runner{Pool: "p", Name: "p-bcdfg-0", Namespace: "ci"}, now); err != nil {
		t.Fatal(err)
	}
	first := roster.Record{StatefulSetUID: "sts-1", SecretUID: "sec-1", GitHubID: 7, PodUID: "pod-1"}
	if err := s.Record(ctx, "p", "p-bcdfg-0", first); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "p", "p-bcdfg-0", roster.Record{StatefulSetUID: "sts-1", PodUID: "pod-2"}); err != nil {
		t.Fatalf("the same StatefulSet again, with a new pod: %v; want it accepted", err)
	}
	for _, other := range []roster.Record{{StatefulSetUID: "sts-2"}, {SecretUID: "sec-2"}, {GitHubID: 8}} {
		if err := s.Record(ctx, "p", "p-bcdfg-0", other); !errors.Is(err, roster.ErrNotRecorded) {
			t.Fatalf("record %+v over %+v: %v, want ErrNotRecorded", other, first, err)
		}
	}
	rs, err := s.Live(ctx, "p")
	if err != nil || len(rs) != 1 {
		t.Fatalf("live %+v, %v", rs, err)
	}
	got := rs[0]
	if got.StatefulSetUID != "sts-1" || got.SecretUID != "sec-1" || got.GitHubID != 7 || !slices.Equal(got.PodUIDs, []string{"pod-1", "pod-2"}) {
		t.Fatalf("recorded %+v; want the first StatefulSet, Secret and id, and both pods", got)
	}
	if !got.HasPod("pod-2") || got.HasPod("pod-3") || got.HasPod("") {
		t.Fatalf("HasPod wrong for %v", got.PodUIDs)
	}
	if err := s.Record(ctx, "p", "p-ghost-0", roster.Record{PodUID: "pod-9"}); !errors.Is(err, roster.ErrNotRecorded) {
		t.Fatalf("record for a runner never added: %v, want ErrNotRecorded", err)
	}
	if err := s.Retire(ctx, "p", "p-bcdfg-0", now); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "p", "p-bcdfg-0", roster.Record{PodUID: "pod-3"}); !errors.Is(err, roster.ErrNotRecorded) {
		t.Fatalf("record for a retired runner: %v, want ErrNotRecorded", err)
	}
}

// failPut is a table whose PutItem fails: a retirement cut short at its
// first write (were the live item deleted first, the runner would be neither
// live nor retired).
type failPut struct{ table.API }

func (failPut) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, errors.New("injected: put refused")
}

// TestRetirementCutShortLeavesTheRunnerLive: a retirement whose write of the
// retired copy fails reports the error and leaves the runner live (the copy is
// written before the live item is deleted),
// so that the object kept brings the next sweep back; the next retirement
// finishes it.
func TestRetirementCutShortLeavesTheRunnerLive(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	ctx := t.Context()
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	s := roster.NewStore(db, name)
	if err := s.Add(ctx, roster.Runner{Pool: "p", Name: "p-bcdfg-0", Namespace: "ci"}, now); err != nil {
		t.Fatal(err)
	}
	if err := roster.NewStore(failPut{db}, name).Retire(ctx, "p", "p-bcdfg-0", now); err == nil {
		t.Fatal("a retirement whose delete failed reported no error")
	}
	if live, err := s.Live(ctx, "p"); err != nil || len(live) != 1 {
		t.Fatalf("live %+v (%v) after a retirement cut short; want the runner still live", live, err)
	}
	if err := s.Retire(ctx, "p", "p-bcdfg-0", now); err != nil {
		t.Fatal(err)
	}
	if live, err := s.Live(ctx, "p"); err != nil || len(live) != 0 {
		t.Fatalf("live %+v (%v) after the retirement finished; want none", live, err)
	}
}
