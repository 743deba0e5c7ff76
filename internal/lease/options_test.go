package lease_test

import (
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/lease"
)

// TestNewRejectsNonsense: a length, margin or call timeout that cannot keep a
// lease is refused, with an error naming it; sensible ones are accepted.
func TestNewRejectsNonsense(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(t0)
	for _, tc := range []struct {
		name   string
		length time.Duration
		opts   []lease.Option
		want   string // "" for accepted
	}{
		{"defaults", 30 * time.Second, nil, ""},
		{"no margin", 30 * time.Second, []lease.Option{lease.WithMargin(0)}, ""},
		{"a margin just under the length", 30 * time.Second, []lease.Option{lease.WithMargin(30*time.Second - 1)}, ""},
		{"zero length", 0, nil, "lease length"},
		{"negative length", -time.Second, nil, "lease length"},
		{"margin equal to the length", 30 * time.Second, []lease.Option{lease.WithMargin(30 * time.Second)}, "lease margin"},
		{"margin over the length", 30 * time.Second, []lease.Option{lease.WithMargin(time.Minute)}, "lease margin"},
		{"negative margin", 30 * time.Second, []lease.Option{lease.WithMargin(-time.Second)}, "lease margin"},
		{"zero call timeout", 30 * time.Second, []lease.Option{lease.WithCallTimeout(0)}, "lease call timeout"},
		{"negative call timeout", 30 * time.Second, []lease.Option{lease.WithCallTimeout(-time.Second)}, "lease call timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, err := lease.New(nil, "t", clk, tc.length, tc.opts...)
			switch {
			case tc.want == "" && (err != nil || l == nil):
				t.Fatalf("New = %v, %v; want accepted", l, err)
			case tc.want != "" && (err == nil || l != nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New = %v, %v; want an error naming %q", l, err, tc.want)
			}
		})
	}
}
