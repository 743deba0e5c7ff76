package runnerversion

import (
	"fmt"
	"slices"
	"time"
)

// Release is an actions/runner release as the daily check saw it.
type Release struct {
	Version     Version
	PublishedAt time.Time
}

// maxReleases bounds the releases Known keeps (about a year of them).
const maxReleases = 24

// Known is what the deployment knows of actions/runner's releases: the ones the
// daily check has seen as the latest, newest first, and the check itself.
type Known struct {
	// AttemptedAt is when the check last asked GitHub (zero: never).
	AttemptedAt time.Time
	// CheckedAt is when GitHub last answered (zero: never).
	CheckedAt time.Time
	// ETag is the latest answer's, for the next conditional request.
	ETag string
	// Releases are those seen as the latest, newest first (at most maxReleases).
	Releases []Release
	// Error is the last attempt's failure ("" when it was answered).
	Error string
}

// Latest is the newest release seen; false when none was.
func (k Known) Latest() (Release, bool) {
	if len(k.Releases) == 0 {
		return Release{}, false
	}
	return k.Releases[0], true
}

// add records r as seen; it keeps the releases newest first, once each.
func (k *Known) add(r Release) {
	for _, x := range k.Releases {
		if x.Version == r.Version {
			return
		}
	}
	k.Releases = append(k.Releases, r)
	slices.SortFunc(k.Releases, func(a, b Release) int { return b.Version.Compare(a.Version) })
	if len(k.Releases) > maxReleases {
		k.Releases = k.Releases[:maxReleases]
	}
}

// State sums up whether GitHub gives a version jobs.
type State string

// The states of an Assessment.
const (
	// Current: the version is the latest release GitHub published.
	Current State = "current"
	// Behind: a newer release exists; GitHub gives jobs until the Deadline.
	Behind State = "behind"
	// Refused: GitHub refuses the version (below MinimumToRegister, or past
	// its Deadline).
	Refused State = "refused"
	// Unknown: no release was seen yet (the daily check has not succeeded).
	Unknown State = "unknown"
)

// MaxDaysLeft caps DaysLeft: a pool on the latest release has at least this
// long once a newer one is published.
const MaxDaysLeft = 30

// Assessment is one version judged against the known releases at an instant.
type Assessment struct {
	Version string `json:"version"`
	// Latest is the newest release seen ("" when none was).
	Latest string `json:"latest,omitempty"`
	State  State  `json:"state"`
	// Deadline is when GitHub stops giving the version jobs (zero: none known).
	Deadline time.Time `json:"deadline,omitzero"`
	// DeadlineExact is false when the version is older than every release
	// seen: the release that followed it was not seen, and the real deadline
	// may be earlier than Deadline, the latest it can be.
	DeadlineExact bool `json:"deadlineExact,omitempty"`
	// DaysLeft counts whole days until the deadline: 0 when refused or when
	// the deadline is not exact (GitHub may refuse the version already),
	// MaxDaysLeft when current, -1 when unknown.
	DaysLeft int `json:"daysLeft"`
	// Reason says why, in words.
	Reason string `json:"reason"`
}

// Assess judges v at now against what k knows.
func Assess(v Version, k Known, now time.Time) Assessment {
	a := Assessment{Version: v.String(), DaysLeft: -1}
	if latest, ok := k.Latest(); ok {
		a.Latest = latest.Version.String()
	}
	if v.Compare(MinimumToRegister) < 0 {
		a.State, a.DaysLeft = Refused, 0
		a.Reason = fmt.Sprintf("GitHub refuses runners older than %s: they can neither register nor receive jobs", MinimumToRegister)
		return a
	}
	next, ok := nextRelease(v, k.Releases)
	switch {
	case len(k.Releases) == 0:
		a.State, a.Reason = Unknown, "no actions/runner release seen yet: the daily check has not succeeded"
		return a
	case !ok:
		a.State, a.DaysLeft = Current, MaxDaysLeft
		a.Reason = "the latest release"
		return a
	}
	a.Deadline = next.PublishedAt.Add(Grace)
	a.DeadlineExact = v.Compare(k.Releases[len(k.Releases)-1].Version) >= 0
	if !now.Before(a.Deadline) {
		a.State, a.DaysLeft = Refused, 0
		a.Reason = fmt.Sprintf("%s was published %s: GitHub gives no jobs to older runners since %s",
			next.Version, next.PublishedAt.UTC().Format(time.DateOnly), a.Deadline.UTC().Format(time.DateOnly))
		return a
	}
	a.State = Behind
	if !a.DeadlineExact {
		// The release after v came out before any this deployment saw, and GitHub
		// may refuse v already: warn as if it did.
		a.DaysLeft = 0
		a.Reason = fmt.Sprintf("older than every release seen since the check began (the oldest, %s, was published %s): "+
			"GitHub may refuse this version already, and does on %s at the latest",
			next.Version, next.PublishedAt.UTC().Format(time.DateOnly), a.Deadline.UTC().Format(time.DateOnly))
		return a
	}
	a.DaysLeft = min(int(a.Deadline.Sub(now)/(24*time.Hour)), MaxDaysLeft)
	a.Reason = fmt.Sprintf("%s was published %s: GitHub stops giving jobs to this version on %s",
		next.Version, next.PublishedAt.UTC().Format(time.DateOnly), a.Deadline.UTC().Format(time.DateOnly))
	return a
}

// nextRelease is the oldest release seen that is newer than v: the one whose
// publication started v's grace period.
func nextRelease(v Version, seen []Release) (Release, bool) {
	var next Release
	found := false
	for _, r := range seen {
		if r.Version.Compare(v) > 0 && (!found || r.Version.Compare(next.Version) < 0) {
			next, found = r, true
		}
	}
	return next, found
}

// PoolVersion is the version a pool states, or Pinned when it states none.
func PoolVersion(stated string) (Version, error) {
	if stated == "" {
		stated = Pinned
	}
	return Parse(stated)
}
