// Package teardown drains a deployment before it is removed: it asks the
// deployed sweeper, again and again, to drain every pool (the drain command of
// package sweepevent) until the sweeper reports no runner object left in the
// cluster, so that `sam delete` leaves nothing behind — no StatefulSet, pod or
// Secret in the runner namespaces. Busy runners are stopped the way a
// scale-down stops them: after their job. The sweeper unregisters each runner
// from GitHub before it deletes its objects; whether GitHub still lists runners
// of the deployment then is asked of GitHub itself (Registrations), when the
// drainer has credentials for it, and otherwise not claimed. The drain mark
// (Mark) is what keeps every sweep draining between two drain invocations.
package teardown

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
)

// Invoker runs the sweeper synchronously with a JSON event and returns its
// JSON answer; an error means the invocation failed (its message included).
type Invoker interface {
	Invoke(ctx context.Context, event []byte) ([]byte, error)
}

// Drainer drives a teardown.
type Drainer struct {
	inv   Invoker
	clock clock.Clock
	out   io.Writer
	// Interval between two drain sweeps.
	Interval time.Duration
	// GitHub, when set, is asked for the deployment's runners once nothing is
	// left in the cluster; nil: GitHub is not checked, and the drain says so.
	GitHub Leftovers
}

// New returns a drainer that prints its progress to out, one line per sweep.
func New(inv Invoker, clk clock.Clock, out io.Writer) *Drainer {
	return &Drainer{inv: inv, clock: clk, out: out, Interval: 15 * time.Second}
}

// ErrNotDrained: the context ended before every runner was gone.
var ErrNotDrained = errors.New("teardown: runners are still left")

// ErrCannotInvoke marks an Invoker's error that retrying cannot fix: no
// credentials, a refusal of the caller's rights, no such function, an endpoint
// whose name does not resolve. An Invoker wraps such an error with it; Drain
// and Cancel then stop at once with it, instead of retrying until their
// deadline and reporting runners left that were never looked at.
var ErrCannotInvoke = errors.New("the sweeper cannot be invoked, and retrying will not change that")

// Drain marks the deployment as being torn down and sweeps until nothing is
// left in the cluster, or ctx ends (ErrNotDrained, with what is left); then,
// with GitHub set, it asks GitHub, and fails with ErrLeftOnGitHub if GitHub
// lists runners of the deployment, or with GitHub's error. An invocation error
// marked ErrCannotInvoke ends it at once with that error. Once it has
// started, the pools stay drained — webhook deliveries and schedules no longer
// create runners — until Cancel.
func (d *Drainer) Drain(ctx context.Context) error {
	for round := 1; ; round++ {
		r, err := d.sweep(ctx, sweepevent.DrainStart)
		switch {
		case errors.Is(err, ErrCannotInvoke):
			return fmt.Errorf("round %d: %w", round, err)
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("%w: %w", ErrNotDrained, err)
		case err != nil:
			fmt.Fprintf(d.out, "round %d: %v (retrying)\n", round, err)
		case len(r.Remaining) == 0 && len(r.Failed) == 0 && len(r.Skipped) == 0:
			return d.finish(ctx, round)
		default:
			fmt.Fprintf(d.out, "round %d: left %s; skipped (lease held) %v; failed %v\n", round, left(r.Remaining), r.Skipped, r.Failed)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrNotDrained, ctx.Err())
		case <-d.clock.After(d.Interval):
		}
	}
}

// Cancel ends a teardown: the pools scale as configured again.
func (d *Drainer) Cancel(ctx context.Context) error {
	_, err := d.sweep(ctx, sweepevent.DrainCancel)
	return err
}

func (d *Drainer) sweep(ctx context.Context, action string) (sweepevent.Report, error) {
	ev, _ := json.Marshal(sweepevent.Event{Drain: action})
	raw, err := d.inv.Invoke(ctx, ev)
	if err != nil {
		return sweepevent.Report{}, fmt.Errorf("invoking the sweeper (drain %s): %w", action, err)
	}
	var r sweepevent.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return sweepevent.Report{}, fmt.Errorf("the sweeper's answer %.200q: %w", raw, err)
	}
	return r, nil
}

// left renders "pool=n, ..." sorted by pool.
func left(m map[string]int) string {
	if len(m) == 0 {
		return "nothing"
	}
	var out string
	for _, p := range slices.Sorted(maps.Keys(m)) {
		if out != "" {
			out += ", "
		}
		out += fmt.Sprintf("%s=%d objects", p, m[p])
	}
	return out
}
