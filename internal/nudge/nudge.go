// Package nudge asks the sweeper to reconcile one pool now, so that scale-up, and
// the refill of a slot a finished ephemeral runner frees, do not wait for the next
// scheduled sweep. A nudge is an asynchronous Lambda invocation with the payload
// Event; the sweeper's schedule is the backstop for any nudge that is lost.
package nudge

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// Event is the sweeper's payload for a one-pool sweep:
// {"pool":"<name>","jobs":[<id>]} after a `queued` delivery, or
// {"pool":"<name>","finished":["<runner>"]} after a `completed` one.
//
// Jobs are the jobs whose deliveries caused the nudge: the sweeper reads them
// with strong consistency if its (eventually consistent) index read lacks them,
// so the nudge never sweeps without the job it is for.
//
// Finished names the runners (GitHub runner names, which are the runner pods'
// names) on which a job has just completed: while jobs wait for the pool, the
// sweeper gives their containers a few seconds to exit, then sweeps, so the slot
// is refilled at once rather than at the next scheduled sweep. It is a hint about
// when to look, never a reason to stop a runner: what the sweeper does with a
// runner still follows the pod's status and GitHub's answers.
type Event struct {
	Pool     string   `json:"pool"`
	Jobs     []int64  `json:"jobs,omitempty"`
	Finished []string `json:"finished,omitempty"`
}

// InvokeAPI is the part of the Lambda client a Lambda nudger uses.
type InvokeAPI interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Lambda nudges by invoking the sweeper function asynchronously (InvocationType Event).
type Lambda struct {
	client   InvokeAPI
	function string
}

// NewLambda returns a nudger that invokes function (name or ARN).
func NewLambda(client InvokeAPI, function string) *Lambda {
	return &Lambda{client: client, function: function}
}

// Nudge queues an asynchronous sweep of ev.Pool. Lambda accepts it with 202.
func (l *Lambda) Nudge(ctx context.Context, ev Event) error {
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encoding nudge: %w", err)
	}
	out, err := l.client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(l.function),
		InvocationType: types.InvocationTypeEvent,
		Payload:        payload,
	})
	if err != nil {
		return fmt.Errorf("nudging sweeper %s for pool %s: %w", l.function, ev.Pool, err)
	}
	if out.StatusCode != 202 {
		return fmt.Errorf("nudging sweeper %s for pool %s: status %d, want 202", l.function, ev.Pool, out.StatusCode)
	}
	return nil
}

// EventFunc adapts a function to a nudger (the local stack calls the sweeper in-process).
type EventFunc func(ctx context.Context, ev Event) error

// Nudge calls f.
func (f EventFunc) Nudge(ctx context.Context, ev Event) error { return f(ctx, ev) }

// Func adapts a function of the pool alone to a nudger. It drops the event's jobs:
// use it only where the sweeper's reads are strongly consistent (dynalite updates
// its indexes with each write); prefer EventFunc.
type Func func(ctx context.Context, pool string) error

// Nudge calls f with ev.Pool.
func (f Func) Nudge(ctx context.Context, ev Event) error { return f(ctx, ev.Pool) }
