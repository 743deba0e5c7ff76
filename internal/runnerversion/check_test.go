package runnerversion

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// memRecords is Records in memory, with the Store's condition.
type memRecords struct {
	mu sync.Mutex
	k  Known
	ok bool
}

func (m *memRecords) Get(context.Context) (Known, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.k, nil
}

func (m *memRecords) Put(_ context.Context, k Known, prev time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if (!m.ok && !prev.IsZero()) || (m.ok && !m.k.AttemptedAt.Equal(prev)) {
		return ErrChanged
	}
	m.k, m.ok = k, true
	return nil
}

// fakeGitHub answers LatestRelease as GitHub does, 304 to a matching ETag.
type fakeGitHub struct {
	mu       sync.Mutex
	calls    int
	etags    []string
	release  githubapi.Release
	fail     error
	released chan struct{} // when set, each call waits for it
}

func (f *fakeGitHub) LatestRelease(_ context.Context, owner, repo, etag string) (githubapi.LatestRelease, error) {
	if f.released != nil {
		<-f.released
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.etags = append(f.etags, etag)
	if owner != "actions" || repo != "runner" {
		return githubapi.LatestRelease{}, errors.New("wrong repository " + owner + "/" + repo)
	}
	if f.fail != nil {
		return githubapi.LatestRelease{}, f.fail
	}
	tag := `"` + f.release.Tag + `"`
	if etag == tag {
		return githubapi.LatestRelease{ETag: etag, NotModified: true}, nil
	}
	return githubapi.LatestRelease{Release: f.release, ETag: tag}, nil
}

func (f *fakeGitHub) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// TestRefreshAsksOnceADay: sweeps within a day, and a restarted function's
// (a new Checker on the same records), make no call; a day later one
// conditional call (304) is made, and a new release after that is recorded.
func TestRefreshAsksOnceADay(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(day("2026-11-25"))
	gh := &fakeGitHub{release: githubapi.Release{Tag: "v2.331.0", PublishedAt: day("2026-11-01")}}
	recs := &memRecords{}
	c := New(recs, gh, clk, nil, nil)
	k, err := c.Refresh(ctx)
	if err != nil || gh.Calls() != 1 || len(k.Releases) != 1 || k.Releases[0].Version != (Version{2, 331, 0}) || k.ETag != `"v2.331.0"` {
		t.Fatalf("first refresh: %+v, %v, %d calls", k, err, gh.Calls())
	}
	for range 5 {
		clk.Step(4 * time.Hour)
		restarted := New(recs, gh, clk, nil, nil)
		if _, err := restarted.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if gh.Calls() != 1 {
		t.Fatalf("%d calls within a day (restarts included); want 1", gh.Calls())
	}
	clk.Step(4 * time.Hour) // 24 h after the first
	if k, err = c.Refresh(ctx); err != nil || gh.Calls() != 2 || gh.etags[1] != `"v2.331.0"` || !k.CheckedAt.Equal(clk.Now()) {
		t.Fatalf("a day later: %+v, %v, %d calls, etags %q; want one conditional call", k, err, gh.Calls(), gh.etags)
	}
	gh.release = githubapi.Release{Tag: "v2.332.0", PublishedAt: day("2026-11-26")}
	clk.Step(CheckEvery)
	if k, err = c.Refresh(ctx); err != nil || len(k.Releases) != 2 || k.Releases[0].Version != (Version{2, 332, 0}) {
		t.Fatalf("after a new release: %+v, %v", k, err)
	}
}

// TestRefreshConcurrentSweepsAskOnce: two sweeps at once, one call.
func TestRefreshConcurrentSweepsAskOnce(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(day("2026-11-25"))
	gh := &fakeGitHub{release: githubapi.Release{Tag: "v2.331.0", PublishedAt: day("2026-11-01")}, released: make(chan struct{})}
	recs := &memRecords{}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	first := make(chan struct{})
	wg.Go(func() { _, errs[0] = New(recs, gh, clk, nil, nil).Refresh(t.Context()); close(first) })
	// The first has claimed the attempt once the records hold it.
	for {
		if k, _ := recs.Get(t.Context()); !k.AttemptedAt.IsZero() {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_, errs[1] = New(recs, gh, clk, nil, nil).Refresh(t.Context())
	close(gh.released)
	wg.Wait()
	<-first
	if errs[0] != nil || errs[1] != nil || gh.Calls() != 1 {
		t.Fatalf("errors %v, %d calls; want one call", errs, gh.Calls())
	}
}

// TestRefreshFailureWaitsADay: a failed call is recorded, and not repeated
// before a day has passed.
func TestRefreshFailureWaitsADay(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(day("2026-11-25"))
	gh := &fakeGitHub{fail: errors.New("github: server error")}
	recs := &memRecords{}
	c := New(recs, gh, clk, nil, nil)
	k, err := c.Refresh(t.Context())
	if err != nil || k.Error != "github: server error" || !k.CheckedAt.IsZero() {
		t.Fatalf("%+v, %v; want the failure recorded", k, err)
	}
	clk.Step(CheckEvery - time.Second)
	if _, err := c.Refresh(t.Context()); err != nil || gh.Calls() != 1 {
		t.Fatalf("%v, %d calls; want no second call within a day", err, gh.Calls())
	}
}

// TestCheckWritesDaysLeftPerPool: one metric line per pool, with its days
// left, the pool's own version or the pinned one: 0 for one refused, or older
// than every release the deployment has seen.
func TestCheckWritesDaysLeftPerPool(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(day("2026-12-15"))
	pinned, err := Parse(Pinned)
	if err != nil {
		t.Fatal(err)
	}
	next := Version{pinned.Major, pinned.Minor + 1, 0}.String()
	gh := &fakeGitHub{release: githubapi.Release{Tag: "v" + next, PublishedAt: day("2026-11-20")}}
	var out bytes.Buffer
	metrics, err := emf.NewWriter(&out, "")
	if err != nil {
		t.Fatal(err)
	}
	// The deployment has checked daily since pinned was the latest.
	seen := &memRecords{ok: true, k: Known{AttemptedAt: clk.Now().Add(-CheckEvery), Releases: []Release{{Version: pinned, PublishedAt: day("2026-10-01")}}}}
	New(seen, gh, clk, nil, metrics).Check(t.Context(), []*pool.Pool{
		{Name: "pinned"}, {Name: "latest", RunnerVersion: next}, {Name: "old", RunnerVersion: "2.320.0"},
		{Name: "older-than-seen", RunnerVersion: "2.329.5"}})
	got := map[string]float64{}
	for line := range strings.Lines(out.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		got[rec["Pool"].(string)] = rec["RunnerVersionDaysLeft"].(float64)
	}
	want := map[string]float64{"pinned": 5, "latest": MaxDaysLeft, "old": 0, "older-than-seen": 0}
	if len(got) != len(want) {
		t.Fatalf("metrics %v, want %v", got, want)
	}
	for p, v := range want {
		if got[p] != v {
			t.Errorf("pool %s: RunnerVersionDaysLeft %v, want %v (all: %v)", p, got[p], v, got)
		}
	}
}

// TestCheckWithoutReleasesWritesOnlyWhatIsKnown: while no release has been
// seen (the check fails), a pool's days left are unknown and not written,
// except for a version below the registration minimum, refused whatever the
// releases.
func TestCheckWithoutReleasesWritesOnlyWhatIsKnown(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	metrics, err := emf.NewWriter(&out, "")
	if err != nil {
		t.Fatal(err)
	}
	gh := &fakeGitHub{fail: errors.New("github: server error")}
	New(&memRecords{}, gh, clocktesting.NewFakeClock(day("2026-12-15")), nil, metrics).Check(t.Context(),
		[]*pool.Pool{{Name: "pinned"}, {Name: "ancient", RunnerVersion: "2.300.0"}})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"Pool":"ancient"`) || !strings.Contains(lines[0], `"RunnerVersionDaysLeft":0`) {
		t.Fatalf("metric lines %q; want only ancient's 0", lines)
	}
}
