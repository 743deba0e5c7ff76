package arcimport_test

import (
	"slices"
	"strings"
	"testing"
)

// TestPersistentRunnersKeepARCsTokenExposure: ARC's persistent runners with
// docker, or a service account, let their jobs read the registration token; the
// import carries that as it was, with allowJobsToReadRegistrationToken and a
// note saying what it risks, so that the pool passes the sweeper's check and the
// reviewer sees the choice. Ephemeral runners, and persistent ones with neither,
// get no opt-in.
func TestPersistentRunnersKeepARCsTokenExposure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, spec string
		want       bool
		how        string
	}{
		{"persistent, ARC's default docker", "ephemeral: false", true, "jobs that use docker are root on the node"},
		{"persistent, dockerd in the runner", "ephemeral: false\ndockerdWithinRunnerContainer: true", true, "jobs that use docker are root on the node"},
		{"persistent, service account", "ephemeral: false\ndockerEnabled: false\nserviceAccountName: ci", true, "every job gets the service account's Kubernetes token"},
		{"persistent, neither", "ephemeral: false\ndockerEnabled: false", false, ""},
		{"ephemeral with docker", "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, _, res := imported(t, rd(tc.spec, ""), withImage)
			if p.AllowJobsToReadRegistrationToken != tc.want {
				t.Fatalf("allowJobsToReadRegistrationToken %v, want %v", p.AllowJobsToReadRegistrationToken, tc.want)
			}
			said := slices.ContainsFunc(res.Notes, func(n string) bool {
				return strings.Contains(n, "allowJobsToReadRegistrationToken: true") && strings.Contains(n, "("+tc.how+")")
			})
			if said != tc.want {
				t.Fatalf("notes %q: want the opt-in said (%v), with why", res.Notes, tc.want)
			}
		})
	}
}
