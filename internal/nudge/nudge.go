// Package nudge asks the sweeper to reconcile one pool now, so that scale-up, and
// the refill of a slot a finished ephemeral runner frees, do not wait for the next
// scheduled sweep. A nudge is an asynchronous Lambda invocation whose payload is
// a sweepevent.Event naming the pool: {"pool":"<name>","jobs":[<id>]} after a
// `queued` delivery, or {"pool":"<name>","finished":["<runner>"]} after a
// `completed` one. The sweeper's schedule is the backstop for any nudge that is
// lost.
package nudge

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
)

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
func (l *Lambda) Nudge(ctx context.Context, ev sweepevent.Event) error {
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
type EventFunc func(ctx context.Context, ev sweepevent.Event) error

// Nudge calls f.
func (f EventFunc) Nudge(ctx context.Context, ev sweepevent.Event) error { return f(ctx, ev) }
