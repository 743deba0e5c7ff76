package groupaccess_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// memRecords is Records in memory.
type memRecords struct {
	mu    sync.Mutex
	items map[string]groupaccess.Access
	puts  int
	fail  error
}

func key(s scope.Scope, group string) string { return s.String() + "#" + strings.ToLower(group) }

func (m *memRecords) Get(_ context.Context, s scope.Scope, group string) (groupaccess.Access, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return groupaccess.Access{}, false, m.fail
	}
	a, ok := m.items[key(s, group)]
	return a, ok, nil
}

func (m *memRecords) Put(_ context.Context, a groupaccess.Access) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.puts++
	m.items[key(a.Scope, a.Group)] = a
	return nil
}

func (m *memRecords) List(context.Context) ([]groupaccess.Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	var out []groupaccess.Stored
	for _, a := range m.items {
		out = append(out, groupaccess.Stored{Scope: a.Scope.String(), Group: a.Group})
	}
	return out, nil
}

func (m *memRecords) Delete(_ context.Context, g groupaccess.Stored) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.items, g.Scope+"#"+strings.ToLower(g.Group))
	return nil
}

// fakeGitHub answers as GitHub does: a request with the current ETag is a
// 304, which keeps the caller's part and costs nothing (counted apart).
type fakeGitHub struct {
	mu          sync.Mutex
	repos       map[string][]string // group (lower-cased) → its selected repositories
	reads       []string            // group of each read
	notModified int
	fail        error
}

func (f *fakeGitHub) etag(group string) string {
	return `"` + strings.Join(f.repos[group], ",") + `"`
}

func (f *fakeGitHub) RunnerGroupAccess(_ context.Context, _ scope.Scope, group string, prev groupaccess.Access) (groupaccess.Access, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	group = strings.ToLower(group)
	f.reads = append(f.reads, group)
	if f.fail != nil {
		return groupaccess.Access{}, f.fail
	}
	if len(prev.Pages) == 1 && prev.Pages[0].ETag == f.etag(group) {
		f.notModified++
		return groupaccess.Access{GroupID: prev.GroupID, Visibility: prev.Visibility, ETag: prev.ETag, Pages: prev.Pages}, nil
	}
	return groupaccess.Access{GroupID: 7, Visibility: groupaccess.Selected, ETag: `"g"`,
		Pages: []groupaccess.Page{{ETag: f.etag(group), Repositories: slices.Clone(f.repos[group])}}}, nil
}

func (f *fakeGitHub) counts() (reads, notModified int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reads), f.notModified
}

func pools(t *testing.T, yaml string) []*pool.Pool {
	t.Helper()
	cfg, err := pool.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*pool.Pool, len(cfg.Pools))
	for i := range cfg.Pools {
		out[i] = &cfg.Pools[i]
	}
	return out
}

const groupedPools = `
pools:
  - name: gpu
    organization: acme
    group: GPUs
    maxReplicas: 1
    kubernetes: {namespace: ns, image: r}
  - name: gpu-big
    organization: acme
    group: gpus
    labels: [big]
    maxReplicas: 1
    kubernetes: {namespace: ns, image: r}
  - name: plain
    organization: acme
    maxReplicas: 1
    kubernetes: {namespace: ns, image: r}
  - name: default
    organization: acme
    group: Default
    maxReplicas: 1
    kubernetes: {namespace: ns, image: r}
  - name: ent
    enterprise: acme-corp
    group: ent-group
    maxReplicas: 1
    kubernetes: {namespace: ns, image: r}
`

var acme = scope.Scope{Organization: "acme"}

// TestRefreshReadsEachGroupOnceEveryFiveMinutes: a group two pools share is
// read once; pools without a group, in Default, or of an enterprise are not
// read. Within RefreshEvery no read is made (restarts included: a new
// Refresher on the same table); then one conditional read, a 304, keeps the
// access and moves its ReadAt; a change on GitHub shows on the read after.
func TestRefreshReadsEachGroupOnceEveryFiveMinutes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	gh := &fakeGitHub{repos: map[string][]string{"gpus": {"acme/ml"}}}
	recs := &memRecords{items: map[string]groupaccess.Access{}}
	ps := pools(t, groupedPools)

	groupaccess.NewRefresher(recs, gh, clk, nil).Refresh(ctx, ps)
	a, ok, _ := recs.Get(ctx, acme, "gpus")
	if reads, _ := gh.counts(); reads != 1 || !ok || !slices.Equal(a.Repositories(), []string{"acme/ml"}) ||
		!a.ReadAt.Equal(clk.Now()) || a.Scope != acme || a.Group != "GPUs" || len(recs.items) != 1 {
		t.Fatalf("first refresh: %d reads (%v), stored %+v (%d items); want one read of gpus, stored with its time",
			reads, gh.reads, a, len(recs.items))
	}

	clk.Step(groupaccess.RefreshEvery - time.Second)
	groupaccess.NewRefresher(recs, gh, clk, nil).Refresh(ctx, ps)
	if reads, _ := gh.counts(); reads != 1 {
		t.Fatalf("%d reads within %s; want 1", reads, groupaccess.RefreshEvery)
	}

	clk.Step(time.Second)
	r := groupaccess.NewRefresher(recs, gh, clk, nil)
	r.Refresh(ctx, ps)
	a, _, _ = recs.Get(ctx, acme, "gpus")
	if reads, notModified := gh.counts(); reads != 2 || notModified != 1 || !a.ReadAt.Equal(clk.Now()) ||
		!slices.Equal(a.Repositories(), []string{"acme/ml"}) {
		t.Fatalf("after %s: %d reads, %d 304s, stored %+v; want one conditional read answered 304, the access kept with a new ReadAt",
			groupaccess.RefreshEvery, reads, notModified, a)
	}

	gh.mu.Lock()
	gh.repos["gpus"] = []string{"acme/ml", "acme/app"}
	gh.mu.Unlock()
	clk.Step(groupaccess.RefreshEvery)
	r.Refresh(ctx, ps)
	a, _, _ = recs.Get(ctx, acme, "gpus")
	if ok, _ := a.Admits("acme/app", false); !ok {
		t.Fatalf("after GitHub added acme/app: stored %+v; want it admitted", a)
	}
}

// TestRefreshFailureKeepsWhatWasRead: a failed read leaves the stored access
// as it was, and the next refresh tries again at once (no five-minute wait).
func TestRefreshFailureKeepsWhatWasRead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	gh := &fakeGitHub{repos: map[string][]string{"gpus": {"acme/ml"}}}
	recs := &memRecords{items: map[string]groupaccess.Access{}}
	ps := pools(t, groupedPools)
	r := groupaccess.NewRefresher(recs, gh, clk, nil)
	r.Refresh(ctx, ps)
	before, _, _ := recs.Get(ctx, acme, "gpus")

	clk.Step(groupaccess.RefreshEvery)
	gh.fail = errors.New("github: get runner group deferred near the rate limit")
	r.Refresh(ctx, ps)
	after, _, _ := recs.Get(ctx, acme, "gpus")
	if !after.ReadAt.Equal(before.ReadAt) || recs.puts != 1 {
		t.Fatalf("after a failed read: stored %+v, %d writes; want the first read's access untouched", after, recs.puts)
	}
	gh.fail = nil
	clk.Step(time.Second)
	r.Refresh(ctx, ps)
	if reads, _ := gh.counts(); reads != 3 || recs.puts != 2 {
		t.Fatalf("the sweep after a failure: %d reads, %d writes; want it read again and stored", reads, recs.puts)
	}
}

// TestRefreshForgetsGroupsNoPoolNames: what is stored of a group no pool of
// the file names any more — its pool removed, or given another group, or of
// another scope — is deleted by the next refresh (nothing would read or
// refresh it again); the groups the pools name stay, whatever their case.
func TestRefreshForgetsGroupsNoPoolNames(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	gh := &fakeGitHub{repos: map[string][]string{"gpus": {"acme/ml"}}}
	recs := &memRecords{items: map[string]groupaccess.Access{}}
	other := scope.Scope{Organization: "other"}
	for _, a := range []groupaccess.Access{
		{Scope: acme, Group: "GPUs", ReadAt: clk.Now()},
		{Scope: acme, Group: "removed", ReadAt: clk.Now()},
		{Scope: other, Group: "gpus", ReadAt: clk.Now()},
	} {
		if err := recs.Put(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	groupaccess.NewRefresher(recs, gh, clk, nil).Refresh(ctx, pools(t, groupedPools))
	stored, _ := recs.List(ctx)
	if len(stored) != 1 || stored[0].Scope != acme.String() || !strings.EqualFold(stored[0].Group, "gpus") {
		t.Fatalf("stored after a refresh: %+v, want only organization/acme's gpus", stored)
	}
	if reads, _ := gh.counts(); reads != 0 {
		t.Fatalf("%d reads of a group read just now, want none", reads)
	}
}
