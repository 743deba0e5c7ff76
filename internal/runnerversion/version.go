package runnerversion

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Version is an actions/runner release number.
type Version struct{ Major, Minor, Patch int }

// Parse reads "2.330.0" or a release tag, "v2.330.0".
func Parse(s string) (Version, error) {
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("runner version %q: want MAJOR.MINOR.PATCH", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || p == "" || p[0] == '+' {
			return Version{}, fmt.Errorf("runner version %q: want MAJOR.MINOR.PATCH", s)
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, nil
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Compare is -1, 0 or +1 as v is older than, the same as, or newer than o.
func (v Version) Compare(o Version) int {
	return cmp.Or(cmp.Compare(v.Major, o.Major), cmp.Compare(v.Minor, o.Minor), cmp.Compare(v.Patch, o.Patch))
}

// GitHub's rules for self-hosted runners (the actions/runner releases page and
// GitHub's changelog; enforced on GitHub Enterprise Cloud since 2026-09-25).
var (
	// MinimumToRegister is the oldest version GitHub lets register at all.
	MinimumToRegister = Version{2, 329, 0}
	// Grace is how long after a release is published the versions before it
	// still get jobs.
	Grace = 30 * 24 * time.Hour
)

// Pinned is the version runner/Dockerfile installs (its RUNNER_VERSION), a
// pool's version when it states none. A test keeps the two equal.
const Pinned = "2.330.0"
