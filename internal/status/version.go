package status

import (
	"fmt"
	"time"
)

// The states of a RunnerVersion (package runnerversion's).
const (
	VersionCurrent = "current"
	VersionBehind  = "behind"
	VersionRefused = "refused"
	VersionUnknown = "unknown"
)

// RunnerVersion is the actions/runner version a pool runs, judged against the
// releases the sweeper's daily check saw (package runnerversion).
type RunnerVersion struct {
	Version string `json:"version"`
	// Stated: the pool's runnerVersion gives it; otherwise it is the version
	// runner/Dockerfile installs.
	Stated bool `json:"stated"`
	// Latest is the newest release seen ("" when none was).
	Latest string `json:"latest,omitempty"`
	// State is current, behind, refused or unknown (no release seen yet).
	State string `json:"state"`
	// Deadline is when GitHub stops giving the version jobs (zero: none known);
	// DeadlineExact is false when it is only the latest it can be.
	Deadline      time.Time `json:"deadline,omitzero"`
	DeadlineExact bool      `json:"deadlineExact,omitempty"`
	// DaysLeft counts whole days to the deadline: 0 when refused or the
	// deadline is not exact, 30 (the most) when current, -1 when unknown.
	DaysLeft int    `json:"daysLeft"`
	Reason   string `json:"reason"`
	// CheckedAt is when GitHub last answered the daily check (zero: never);
	// CheckError is the last attempt's failure.
	CheckedAt  time.Time `json:"checkedAt,omitzero"`
	CheckError string    `json:"checkError,omitempty"`
}

// versionRows are the RUNNER VERSIONS section's rows, one per pool that has one.
func versionRows(pools []Pool) [][]string {
	var rows [][]string
	for _, p := range pools {
		if v := p.RunnerVersion; v != nil {
			rows = append(rows, []string{p.Name, versionName(v), dash(v.Latest), v.State, deadlineCell(v), daysCell(v), oneLine(versionWhy(v))})
		}
	}
	return rows
}

var versionHeader = []string{"POOL", "VERSION", "LATEST", "STATE", "DEADLINE", "DAYS LEFT", "WHY"}

// versionLine is `status POOL`'s line.
func versionLine(v *RunnerVersion) string {
	s := fmt.Sprintf("%s, %s", versionName(v), v.State)
	if v.Latest != "" {
		s += " (latest " + v.Latest + ")"
	}
	if !v.Deadline.IsZero() {
		s += fmt.Sprintf(", deadline %s, %s days left", deadlineCell(v), daysCell(v))
	}
	return s + ": " + versionWhy(v)
}

func versionName(v *RunnerVersion) string {
	if v.Stated {
		return v.Version
	}
	return v.Version + " (runner/Dockerfile)"
}

func versionWhy(v *RunnerVersion) string {
	why := v.Reason
	switch {
	case v.State == VersionRefused:
		why += "; upgrade the pool's image (README: Runner versions)"
	case v.CheckError != "":
		why += "; the last check failed: " + v.CheckError
	}
	if v.CheckedAt.IsZero() && v.State != VersionUnknown {
		why += " (GitHub's releases not checked yet)"
	}
	return why
}

func deadlineCell(v *RunnerVersion) string {
	if v.Deadline.IsZero() {
		return "-"
	}
	d := v.Deadline.UTC().Format(time.DateOnly)
	if !v.DeadlineExact {
		d = "by " + d
	}
	return d
}

func daysCell(v *RunnerVersion) string {
	switch {
	case v.DaysLeft < 0:
		return "-"
	case v.State == VersionCurrent:
		return fmt.Sprintf("≥%d", v.DaysLeft)
	case v.State == VersionBehind && !v.DeadlineExact:
		return "0 (unsure)"
	}
	return itoa(v.DaysLeft)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
