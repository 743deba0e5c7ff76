package githubapi_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
)

// TestCallsCountEveryRequest: Stats.Calls counts every request a client sends to
// GitHub — installation lookups, installation-token creation, the App's own
// calls and 304s — as GitHub (the front) counts them.
func TestCallsCountEveryRequest(t *testing.T) {
	t.Parallel()
	f := newFront(t)
	ctx := t.Context()
	r, err := githubapi.NewRouter(githubapi.Config{BaseURL: f.url, Clock: f.clock, Auth: appAuth(t)})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() error
		want int // requests the step sends
	}{
		{"first call on org-a: lookup, installation token, list", func() error { _, err := r.Runners(ctx, orgA); return err }, 3},
		{"org-a again: the list answered 304", func() error { _, err := r.Runners(ctx, orgA); return err }, 1},
		{"a repository of org-b: lookup, installation token, registration token", func() error {
			_, err := r.RegistrationToken(ctx, repoB)
			return err
		}, 3},
	}
	for _, s := range steps {
		before, calls := f.Requests(), r.Stats().Calls
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if sent := f.Requests() - before; sent != s.want {
			t.Fatalf("%s: %d requests, want %d", s.name, sent, s.want)
		}
		if counted := r.Stats().Calls - calls; counted != s.want {
			t.Errorf("%s: Stats counted %d calls, GitHub got %d", s.name, counted, s.want)
		}
	}
	if st := r.Stats(); st.NotModified != 1 {
		t.Errorf("router stats %+v, want 1 not-modified", st)
	}

	app, err := githubapi.NewApp(githubapi.Config{BaseURL: f.url, Clock: f.clock, Auth: appAuth(t)})
	if err != nil {
		t.Fatal(err)
	}
	before := f.Requests()
	if _, err := app.Deliveries(ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := app.Redeliver(ctx, 1); err == nil {
		t.Fatal("redelivering an unknown delivery: no error")
	}
	if sent, counted := f.Requests()-before, app.Stats().Calls; sent != 2 || counted != 2 {
		t.Errorf("App client: %d requests, %d counted; want 2 and 2", sent, counted)
	}
}

// TestCallCounterCountsItsOwnWork: a counter in the context counts every
// request sent for calls made with it — lookup and installation token included
// — and none of another context's.
func TestCallCounterCountsItsOwnWork(t *testing.T) {
	t.Parallel()
	f := newFront(t)
	r, err := githubapi.NewRouter(githubapi.Config{BaseURL: f.url, Clock: f.clock, Auth: appAuth(t)})
	if err != nil {
		t.Fatal(err)
	}
	var mine, other atomic.Int64
	before := f.Requests()
	if _, err := r.Runners(githubapi.WithCallCounter(t.Context(), &mine), orgA); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RegistrationToken(githubapi.WithCallCounter(t.Context(), &other), orgA); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Runners(t.Context(), orgA); err != nil { // counted by no counter
		t.Fatal(err)
	}
	if sent := f.Requests() - before; sent != 5 {
		t.Fatalf("%d requests, want 5 (lookup, installation token, list, registration token, list)", sent)
	}
	if mine.Load() != 3 || other.Load() != 1 {
		t.Fatalf("counters: mine %d (want 3: lookup, installation token, list), other %d (want 1)", mine.Load(), other.Load())
	}
}
