package sweeper_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

// checks records the pools each Check was given.
type checks struct {
	mu    sync.Mutex
	pools [][]string
}

func (c *checks) Check(_ context.Context, pools []*pool.Pool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.Name
	}
	c.pools = append(c.pools, names)
}

// TestScheduledSweepChecksRunnerVersions: a scheduled sweep checks every
// configured pool's runner version, once; a nudge does not.
func TestScheduledSweepChecksRunnerVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := &checks{}
	s, err := sweeper.New(mustPools(t), e.rs, e.status, e.leases, nil, e.clock, nil, sweeper.Options{Versions: c})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Handle(t.Context(), sweeper.Event{Pool: "octo"}); err != nil {
		t.Fatal(err)
	}
	if len(c.pools) != 0 {
		t.Fatalf("a nudge checked versions: %v", c.pools)
	}
	if _, err := s.Handle(t.Context(), scheduled); err != nil {
		t.Fatal(err)
	}
	if len(c.pools) != 1 || !slices.Equal(c.pools[0], []string{"octo", "octo-gpu"}) {
		t.Fatalf("checks %v; want one of [octo octo-gpu]", c.pools)
	}
}
