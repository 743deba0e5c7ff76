package githubapi_test

import (
	"errors"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestLatestReleaseConditional: the latest release's tag and publication, its
// ETag; asked again with it, a 304 that costs no rate limit; a newer release
// changes the answer; a repository without releases is ErrNotFound. Every
// exchange is checked against GitHub's description (newEnv).
func TestLatestReleaseConditional(t *testing.T) {
	t.Parallel()
	published := time.Date(2026, 11, 20, 16, 4, 5, 0, time.UTC)
	e := newEnv(t, githubsim.Options{RunnerReleases: []githubsim.RunnerRelease{
		{Version: "2.331.0", PublishedAt: published}, {Version: "2.330.0", PublishedAt: published.AddDate(0, -1, 0)}}})
	ctx := t.Context()
	first, err := e.client.LatestRelease(ctx, "actions", "runner", "")
	if err != nil || first.NotModified || first.Release.Tag != "v2.331.0" || !first.Release.PublishedAt.Equal(published) || first.ETag == "" {
		t.Fatalf("LatestRelease = %+v, %v; want v2.331.0 published %s with an ETag", first, err, published)
	}
	remaining := e.sim.RateRemaining(installation)
	again, err := e.client.LatestRelease(ctx, "actions", "runner", first.ETag)
	if err != nil || !again.NotModified || again.ETag != first.ETag {
		t.Fatalf("with the ETag: %+v, %v; want not modified", again, err)
	}
	if got := e.sim.RateRemaining(installation); got != remaining {
		t.Errorf("the 304 cost %d rate-limit units, want 0", remaining-got)
	}
	if st := e.client.Stats(); st.NotModified != 1 {
		t.Errorf("Stats().NotModified = %d, want 1", st.NotModified)
	}
	e.sim.SetRunnerReleases(githubsim.RunnerRelease{Version: "2.332.0", PublishedAt: published.AddDate(0, 0, 10)})
	newer, err := e.client.LatestRelease(ctx, "actions", "runner", first.ETag)
	if err != nil || newer.NotModified || newer.Release.Tag != "v2.332.0" || newer.ETag == first.ETag {
		t.Fatalf("after a new release: %+v, %v; want v2.332.0", newer, err)
	}
	if _, err := e.client.LatestRelease(ctx, "acme", "app", ""); !errors.Is(err, githubapi.ErrNotFound) {
		t.Fatalf("a repository without releases: %v; want ErrNotFound", err)
	}
}
