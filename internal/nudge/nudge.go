// Package nudge asks the sweeper to reconcile one pool now, so that scale-up does
// not wait for the next scheduled sweep. A nudge is an asynchronous Lambda
// invocation with the payload Event; the sweeper's schedule is the backstop for
// any nudge that is lost.
package nudge

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// Event is the sweeper's payload for a one-pool sweep: {"pool":"<name>"}.
type Event struct {
	Pool string `json:"pool"`
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

// Nudge queues an asynchronous sweep of pool. Lambda accepts it with 202.
func (l *Lambda) Nudge(ctx context.Context, pool string) error {
	payload, err := json.Marshal(Event{Pool: pool})
	if err != nil {
		return fmt.Errorf("encoding nudge: %w", err)
	}
	out, err := l.client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(l.function),
		InvocationType: types.InvocationTypeEvent,
		Payload:        payload,
	})
	if err != nil {
		return fmt.Errorf("nudging sweeper %s for pool %s: %w", l.function, pool, err)
	}
	if out.StatusCode != 202 {
		return fmt.Errorf("nudging sweeper %s for pool %s: status %d, want 202", l.function, pool, out.StatusCode)
	}
	return nil
}

// Func adapts a function to a nudger (the local stack calls the sweeper in-process).
type Func func(ctx context.Context, pool string) error

// Nudge calls f.
func (f Func) Nudge(ctx context.Context, pool string) error { return f(ctx, pool) }
