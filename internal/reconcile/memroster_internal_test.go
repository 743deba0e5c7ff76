package reconcile

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/roster"
)

// memRoster is an in-memory roster with roster.Store's rules (the
// fake-clientset tests of this package have no DynamoDB): a UID or id is
// recorded once, a record for a runner that is not live is refused.
type memRoster struct {
	mu      sync.Mutex
	live    []roster.Runner
	retired []roster.Runner
	records int
}

func (m *memRoster) Add(_ context.Context, rn roster.Runner, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rn.Created = now
	m.live = append(m.live, rn)
	return nil
}

func (m *memRoster) Live(_ context.Context, pool string) ([]roster.Runner, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []roster.Runner
	for _, rn := range m.live {
		if rn.Pool == pool {
			rn.PodUIDs = slices.Clone(rn.PodUIDs)
			out = append(out, rn)
		}
	}
	return out, nil
}

func (m *memRoster) Record(_ context.Context, pool, name string, rec roster.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.live, func(rn roster.Runner) bool { return rn.Pool == pool && rn.Name == name })
	if i < 0 {
		return roster.ErrNotRecorded
	}
	rn := &m.live[i]
	if differs(rn.StatefulSetUID, rec.StatefulSetUID) || differs(rn.SecretUID, rec.SecretUID) ||
		rn.GitHubID != 0 && rec.GitHubID != 0 && rn.GitHubID != rec.GitHubID {
		return roster.ErrNotRecorded
	}
	m.records++
	if rec.StatefulSetUID != "" {
		rn.StatefulSetUID = rec.StatefulSetUID
	}
	if rec.SecretUID != "" {
		rn.SecretUID = rec.SecretUID
	}
	if rec.GitHubID != 0 {
		rn.GitHubID = rec.GitHubID
	}
	if rec.PodUID != "" && !rn.HasPod(rec.PodUID) {
		rn.PodUIDs = append(rn.PodUIDs, rec.PodUID)
	}
	return nil
}

func differs(recorded, offered string) bool {
	return recorded != "" && offered != "" && recorded != offered
}

func (m *memRoster) Retire(_ context.Context, pool, name string, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.live, func(rn roster.Runner) bool { return rn.Pool == pool && rn.Name == name })
	if i < 0 {
		return nil
	}
	rn := m.live[i]
	rn.Retired = now
	m.retired = append(m.retired, rn)
	m.live = slices.Delete(m.live, i, i+1)
	return nil
}

func (m *memRoster) Lookup(_ context.Context, pool, name string) (roster.Runner, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rn := range slices.Concat(m.live, m.retired) {
		if rn.Pool == pool && rn.Name == name {
			return rn, true, nil
		}
	}
	return roster.Runner{}, false, nil
}

// logger is the reconciler's logger, or a discarding one.
func (r *Reconciler) logger() *slog.Logger {
	if r.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.log
}

func (m *memRoster) Has(ctx context.Context, pool, name string) (bool, error) {
	_, found, err := m.Lookup(ctx, pool, name)
	return found, err
}
