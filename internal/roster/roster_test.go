package roster_test

import (
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
// added, not on another pool's, and stays on it once retired, with a TTL of
// Linger; retiring a runner never added does not put it on the roster. Has
// reads consistently (ConsistentOnly refuses other reads).
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
	if has("linux", "linux-bcdfg-0") {
		t.Fatal("a runner never added is on the roster")
	}
	if err := s.Add(ctx, "linux", "linux-bcdfg-0", now); err != nil {
		t.Fatal(err)
	}
	if !has("linux", "linux-bcdfg-0") || has("linux-x", "linux-bcdfg-0") || has("linux", "linux-bcdfh-0") {
		t.Fatal("the roster does not hold exactly the runner added, in its pool")
	}
	if err := s.Retire(ctx, "linux", "linux-bcdfg-0", now); err != nil {
		t.Fatal(err)
	}
	if !has("linux", "linux-bcdfg-0") {
		t.Fatal("a retired runner left the roster at once; want it kept for Linger")
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(name), Key: table.Key(table.RosterPK("linux"), "linux-bcdfg-0")})
	if err != nil {
		t.Fatal(err)
	}
	if got := table.Int(out.Item, table.TTLAttribute); got != now.Add(roster.Linger).Unix() {
		t.Fatalf("retired runner's TTL = %d, want %d (Linger after retirement)", got, now.Add(roster.Linger).Unix())
	}
	if err := s.Retire(ctx, "linux", "linux-ghost-0", now); err != nil || has("linux", "linux-ghost-0") {
		t.Fatalf("retiring a runner never added: %v; want no error and nothing on the roster", err)
	}
}
