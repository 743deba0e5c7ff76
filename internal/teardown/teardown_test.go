package teardown_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
	"github.com/runnerscaler/runnerscaler/internal/teardown"
)

// script answers each invocation with the next report or error.
type script struct {
	answers []any // sweepevent.Report or error
	events  []string
}

func (s *script) Invoke(_ context.Context, event []byte) ([]byte, error) {
	s.events = append(s.events, string(event))
	a := s.answers[0]
	if len(s.answers) > 1 {
		s.answers = s.answers[1:]
	}
	if err, ok := a.(error); ok {
		return nil, err
	}
	return json.Marshal(a)
}

func drainer(s *script, out *strings.Builder) *teardown.Drainer {
	d := teardown.New(s, clock.RealClock{}, out)
	d.Interval = time.Millisecond
	return d
}

// TestDrainEndsOnlyWhenNothingIsLeft: an invocation error, runners left, a
// skipped pool and a failed one all mean another round.
func TestDrainEndsOnlyWhenNothingIsLeft(t *testing.T) {
	t.Parallel()
	s := &script{answers: []any{
		errors.New("Unhandled: throttled"),
		sweepevent.Report{Draining: true, Remaining: map[string]int{"a": 3}},
		sweepevent.Report{Draining: true, Skipped: []string{"a"}},
		sweepevent.Report{Draining: true, Failed: []string{"b"}},
		sweepevent.Report{Draining: true},
	}}
	var out strings.Builder
	if err := drainer(s, &out).Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(s.events) != 5 {
		t.Fatalf("%d rounds, want 5:\n%s", len(s.events), out.String())
	}
	for _, ev := range s.events {
		if ev != `{"pool":"","drain":"start"}` {
			t.Fatalf("event %s, want a drain start", ev)
		}
	}
	for _, want := range []string{"throttled (retrying)", "a=3 objects", "skipped (lease held) [a]", "failed [b]", "drained, nothing left"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDrainStopsAtOnceOnAnErrorRetryingCannotFix: an invocation error marked
// ErrCannotInvoke ends the drain at the first round with that error, not with
// ErrNotDrained at the deadline.
func TestDrainStopsAtOnceOnAnErrorRetryingCannotFix(t *testing.T) {
	t.Parallel()
	denied := fmt.Errorf("%w: AccessDeniedException: not authorized", teardown.ErrCannotInvoke)
	s := &script{answers: []any{denied, sweepevent.Report{Draining: true}}}
	var out strings.Builder
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := drainer(s, &out).Drain(ctx)
	if !errors.Is(err, teardown.ErrCannotInvoke) || errors.Is(err, teardown.ErrNotDrained) || !strings.Contains(err.Error(), "AccessDeniedException") {
		t.Fatalf("error %v, want ErrCannotInvoke naming AccessDeniedException", err)
	}
	if len(s.events) != 1 || ctx.Err() != nil {
		t.Fatalf("%d invocations, want 1 and no wait for the deadline", len(s.events))
	}
}

func TestDrainGivesUpWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	s := &script{answers: []any{sweepevent.Report{Draining: true, Remaining: map[string]int{"busy": 1}}}}
	var out strings.Builder
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := drainer(s, &out).Drain(ctx)
	if !errors.Is(err, teardown.ErrNotDrained) {
		t.Fatalf("error %v, want ErrNotDrained", err)
	}
}

func TestCancelSendsCancel(t *testing.T) {
	t.Parallel()
	s := &script{answers: []any{sweepevent.Report{}}}
	var out strings.Builder
	if err := drainer(s, &out).Cancel(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(s.events) != 1 || !strings.Contains(s.events[0], `"drain":"cancel"`) {
		t.Fatalf("events %v, want one drain cancel", s.events)
	}
	s = &script{answers: []any{errors.New("no such function")}}
	if err := drainer(s, &out).Cancel(t.Context()); err == nil || !strings.Contains(err.Error(), "no such function") {
		t.Fatalf("cancel error %v, want the invocation's", err)
	}
}

// TestDrainEntryIsTheDrainAlias: whatever form of the function the operator
// names, the drain invokes its drain alias, and never another qualifier.
func TestDrainEntryIsTheDrainAlias(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:lambda:eu-west-1:123456789012:function:stack-sweeper"
	for in, want := range map[string]string{
		"stack-sweeper":                       "stack-sweeper:drain",
		"stack-sweeper:drain":                 "stack-sweeper:drain",
		"123456789012:function:stack-sweeper": "123456789012:function:stack-sweeper:drain",
		arn:                                   arn + ":drain",
		arn + ":drain":                        arn + ":drain",
		"arn:aws-cn:lambda:cn-north-1:1:function:f": "arn:aws-cn:lambda:cn-north-1:1:function:f:drain",
	} {
		if got, err := teardown.DrainEntry(in); err != nil || got != want {
			t.Errorf("DrainEntry(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"stack-sweeper:nudge", arn + ":nudge", arn + ":$LATEST", "123456789012:function:stack-sweeper:3", "a:b:c:d:e", "stack-sweeper:", ""} {
		if got, err := teardown.DrainEntry(in); err == nil {
			t.Errorf("DrainEntry(%q) = %q, want an error", in, got)
		}
	}
}
