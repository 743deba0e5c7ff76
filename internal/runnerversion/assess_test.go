package runnerversion

import (
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func day(d string) time.Time {
	t, err := time.Parse(time.DateOnly, d)
	if err != nil {
		panic(err)
	}
	return t
}

func mustParse(t *testing.T, s string) Version {
	t.Helper()
	v, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseAndCompare(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "2.330", "2.330.0.1", "latest", "2.x.0", "2.-1.0", "2.+1.0", "2..0"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
	if v := mustParse(t, "v2.330.1"); v != (Version{2, 330, 1}) || v.String() != "2.330.1" {
		t.Errorf("Parse(v2.330.1) = %v", v)
	}
	// Numeric, not lexical: 2.99.0 is older than 2.330.0.
	if mustParse(t, "2.99.0").Compare(mustParse(t, "2.330.0")) >= 0 || mustParse(t, "3.0.0").Compare(mustParse(t, "2.999.9")) <= 0 {
		t.Error("Compare is not numeric")
	}
}

// TestAssessDeadline: a version gets jobs until Grace after the release that
// followed it was published; days left count down on the fake clock, and the
// version is refused from the deadline on.
func TestAssessDeadline(t *testing.T) {
	t.Parallel()
	k := Known{}
	k.add(Release{Version: Version{2, 331, 0}, PublishedAt: day("2026-11-01")})
	k.add(Release{Version: Version{2, 332, 0}, PublishedAt: day("2026-11-20")})
	clk := clocktesting.NewFakeClock(day("2026-11-25"))
	v := mustParse(t, "2.331.0")

	a := Assess(v, k, clk.Now())
	if a.State != Behind || a.Latest != "2.332.0" || !a.Deadline.Equal(day("2026-12-20")) || a.DaysLeft != 25 || !a.DeadlineExact {
		t.Fatalf("5 days after 2.332.0: %+v; want behind, deadline 2026-12-20, 25 days left, exact", a)
	}
	clk.Step(18*24*time.Hour + time.Hour) // 2026-12-13T01:00
	if a := Assess(v, k, clk.Now()); a.State != Behind || a.DaysLeft != 6 {
		t.Fatalf("a week before the deadline: %+v; want behind with 6 whole days left", a)
	}
	clk.SetTime(day("2026-12-20"))
	a = Assess(v, k, clk.Now())
	if a.State != Refused || a.DaysLeft != 0 || !strings.Contains(a.Reason, "2.332.0 was published 2026-11-20") {
		t.Fatalf("at the deadline: %+v; want refused, naming the release that started the grace period", a)
	}
	// The latest release has no deadline yet: at least MaxDaysLeft.
	if a := Assess(mustParse(t, "2.332.0"), k, clk.Now()); a.State != Current || a.DaysLeft != MaxDaysLeft || !a.Deadline.IsZero() {
		t.Fatalf("the latest: %+v; want current, %d days", a, MaxDaysLeft)
	}
	// Older than every release seen: the release after it is unknown, and
	// GitHub may refuse it already: 0 days, the oldest seen's deadline the latest.
	if a := Assess(mustParse(t, "2.330.0"), k, day("2026-11-25")); a.State != Behind || a.DaysLeft != 0 ||
		!a.Deadline.Equal(day("2026-12-01")) || a.DeadlineExact || !strings.Contains(a.Reason, "may refuse this version already") {
		t.Fatalf("older than every release seen: %+v; want 0 days, the oldest seen's deadline, marked not exact", a)
	}
	// ... and refused for certain once even that deadline has passed.
	if a := Assess(mustParse(t, "2.330.0"), k, day("2026-12-01")); a.State != Refused || a.DaysLeft != 0 {
		t.Fatalf("older than every release seen, past the oldest's deadline: %+v; want refused", a)
	}
}

// TestAssessMinimum: below the registration minimum, a version is refused
// whatever the releases, even before any check succeeded.
func TestAssessMinimum(t *testing.T) {
	t.Parallel()
	a := Assess(mustParse(t, "2.328.9"), Known{}, day("2026-11-25"))
	if a.State != Refused || a.DaysLeft != 0 || !strings.Contains(a.Reason, "older than 2.329.0") {
		t.Fatalf("%+v; want refused naming the minimum", a)
	}
	if a := Assess(mustParse(t, "2.329.0"), Known{}, day("2026-11-25")); a.State != Unknown || a.DaysLeft != -1 {
		t.Fatalf("no release seen: %+v; want unknown", a)
	}
}

func TestKnownKeepsReleasesNewestFirstOnce(t *testing.T) {
	t.Parallel()
	var k Known
	for i := range maxReleases + 5 {
		k.add(Release{Version: Version{2, 300 + i, 0}, PublishedAt: day("2026-01-01").AddDate(0, 0, i)})
	}
	k.add(Release{Version: Version{2, 310, 0}})
	if len(k.Releases) != maxReleases || k.Releases[0].Version != (Version{2, 300 + maxReleases + 4, 0}) {
		t.Fatalf("kept %d releases, newest %v", len(k.Releases), k.Releases[0].Version)
	}
}

func TestPinnedMatchesTheDockerfile(t *testing.T) {
	t.Parallel()
	raw := readFile(t, "../../runner/Dockerfile")
	want := "ARG RUNNER_VERSION=" + Pinned + "\n"
	if !strings.Contains(raw, want) {
		t.Fatalf("runner/Dockerfile does not pin %q: keep Pinned and the Dockerfile's RUNNER_VERSION equal", want)
	}
}
