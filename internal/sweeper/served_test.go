package sweeper

import (
	"slices"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestRemovedPoolsOnlyInServedScopes: a removed pool is drained in a scope of
// the pools file, or in the one its status recorded while it was in the file;
// one that names any other scope is refused, named in the error.
func TestRemovedPoolsOnlyInServedScopes(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(`
pools:
  - name: a
    organization: acme
    maxReplicas: 2
    kubernetes: {namespace: ns, image: runner:1}
`))
	if err != nil {
		t.Fatal(err)
	}
	db, table := testenv.Table(t)
	status := poolstate.NewStore(db, table)
	ctx := t.Context()
	for name, sc := range map[string]string{"b": "organization/beta", "c": "organization/gamma"} {
		if _, err := status.Put(ctx, poolstate.Status{Pool: name, Scope: sc}); err != nil {
			t.Fatal(err)
		}
	}
	s := &Sweeper{pools: cfg, status: status}
	victim := scope.Scope{Organization: "victim"}
	got, err := s.served(ctx, []*pool.Pool{
		pool.Removed("same", "ns", scope.Scope{Organization: "ACME"}, true), // a's scope (names are case-insensitive)
		pool.Removed("b", "ns", scope.Scope{Organization: "beta"}, true),    // the scope b recorded
		pool.Removed("c", "ns", victim, true),                               // c recorded another
		pool.Removed("ghost", "ns", victim, true),                           // nothing recorded
	})
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"same", "b"}) {
		t.Errorf("drained %v, want same and b", names)
	}
	for _, refused := range []string{"pool c: ", "pool ghost: "} {
		if err == nil || !strings.Contains(err.Error(), refused) || !strings.Contains(err.Error(), "organization/victim") {
			t.Errorf("error %v, want it to name %q and the scope organization/victim", err, refused)
		}
	}
}
