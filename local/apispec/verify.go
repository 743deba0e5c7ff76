package apispec

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// maxReported bounds the distinct failures Verify reports for one test.
const maxReported = 20

// Verify checks, when t ends, every exchange and delivery sim recorded (see
// githubsim.Server.Conformance) against the descriptions, and fails t for each
// one that does not conform, or when the record overflowed. Cleanups run last in,
// first out: call Verify before registering the cleanups that stop the
// simulator's clients, so that it sees their last exchanges.
func Verify(t testing.TB, sim *githubsim.Server) {
	t.Helper()
	d, err := Load()
	if err != nil {
		t.Fatalf("loading GitHub's API description: %v", err)
	}
	t.Cleanup(func() {
		report := d.Check(context.Background(), sim.Conformance())
		for _, line := range append(report.Generic, report.NullBodies...) {
			t.Logf("GitHub API conformance, allowed outside the description: %s", line)
		}
		for _, f := range report.Failures {
			t.Errorf("GitHub API conformance: %s", f)
		}
	})
}

// Report is the outcome of Check.
type Report struct {
	// Failures are the distinct reasons exchanges or deliveries do not conform,
	// with how many did so, at most maxReported of them (the last says how many
	// more there were).
	Failures []string
	// Generic lists the operations answered with a status they do not list but
	// GitHub gives any operation (see GenericStatuses), with how often.
	Generic []string
	// NullBodies lists the operations whose request body was the JSON null
	// (taken as none, see CheckExchange), with how often.
	NullBodies []string
	// Exchanges and Deliveries count what was checked.
	Exchanges, Deliveries int
}

// Check checks a simulator's record.
func (d *Description) Check(ctx context.Context, rec githubsim.Record) Report {
	failures := map[string]int{}
	generic := map[string]int{}
	nullBodies := map[string]int{}
	for _, x := range rec.Exchanges {
		m, err := d.CheckExchange(ctx, Exchange(x))
		switch {
		case err != nil:
			failures[err.Error()]++
		case m.Generic:
			generic[fmt.Sprintf("%s %s (%s) answered %d", m.Method, m.Path, m.OperationID, m.Status)]++
		}
		if err == nil && m.NullBody {
			nullBodies[fmt.Sprintf("%s %s (%s) sent the body null", m.Method, m.Path, m.OperationID)]++
		}
	}
	for _, dl := range rec.Deliveries {
		if err := d.CheckDelivery(dl.Event, dl.Payload); err != nil {
			failures[err.Error()]++
		}
	}
	if rec.Dropped > 0 {
		failures[fmt.Sprintf("the simulator's record overflowed: %d exchanges or deliveries were not checked", rec.Dropped)]++
	}
	r := Report{Exchanges: len(rec.Exchanges), Deliveries: len(rec.Deliveries)}
	r.Failures = counted(failures)
	if len(r.Failures) > maxReported {
		more := len(r.Failures) - maxReported
		r.Failures = append(r.Failures[:maxReported], fmt.Sprintf("and %d more distinct failures", more))
	}
	r.Generic = counted(generic)
	r.NullBodies = counted(nullBodies)
	return r
}

func counted(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 1 {
			k = fmt.Sprintf("%s (%d times)", k, m[k])
		}
		out = append(out, strings.TrimSpace(k))
	}
	return out
}
