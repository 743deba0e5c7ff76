package nudge_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/runnerscaler/runnerscaler/internal/nudge"
	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
)

// invoker records the invocation and answers with status or err.
type invoker struct {
	in     *lambda.InvokeInput
	status int32
	err    error
}

func (i *invoker) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	i.in = in
	if i.err != nil {
		return nil, i.err
	}
	return &lambda.InvokeOutput{StatusCode: i.status}, nil
}

// TestNudgeInvokesTheSweeperAsynchronously: a nudge is an asynchronous
// invocation of the named function whose payload carries the pool and the
// event's jobs or finished runners, and nothing else.
func TestNudgeInvokesTheSweeperAsynchronously(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ev   sweepevent.Event
		want string
	}{
		{sweepevent.Event{Pool: "octo", Jobs: []int64{7}}, `{"pool":"octo","jobs":[7]}`},
		{sweepevent.Event{Pool: "octo", Finished: []string{"octo-bcdfg-0"}}, `{"pool":"octo","finished":["octo-bcdfg-0"]}`},
	} {
		inv := &invoker{status: 202}
		if err := nudge.NewLambda(inv, "sweeper-fn").Nudge(t.Context(), tc.ev); err != nil {
			t.Fatal(err)
		}
		if got := aws.ToString(inv.in.FunctionName); got != "sweeper-fn" {
			t.Errorf("function %q, want sweeper-fn", got)
		}
		if inv.in.InvocationType != types.InvocationTypeEvent {
			t.Errorf("invocation type %q, want Event", inv.in.InvocationType)
		}
		if string(inv.in.Payload) != tc.want {
			t.Errorf("payload %s, want %s", inv.in.Payload, tc.want)
		}
	}
}

// TestNudgeFailures: a failed invocation and an answer other than 202 are
// errors naming the function and the pool.
func TestNudgeFailures(t *testing.T) {
	t.Parallel()
	throttled := errors.New("throttled")
	for name, inv := range map[string]*invoker{"invoke fails": {err: throttled}, "status 200": {status: 200}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := nudge.NewLambda(inv, "sweeper-fn").Nudge(t.Context(), sweepevent.Event{Pool: "octo"})
			if err == nil || !strings.Contains(err.Error(), "sweeper-fn") || !strings.Contains(err.Error(), "pool octo") {
				t.Fatalf("error %v, want one naming sweeper-fn and pool octo", err)
			}
			if inv.err != nil && !errors.Is(err, throttled) {
				t.Fatalf("error %v does not wrap the invocation's", err)
			}
		})
	}
}
