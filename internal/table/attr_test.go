package table_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// TestConditionFailed: a refused condition is recognised however it is wrapped
// (as the SDK returns it, and wrapped again by a caller); no other error is, nor
// the exceptions that only resemble it.
func TestConditionFailed(t *testing.T) {
	t.Parallel()
	ccf := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	asTheSDKReturnsIt := &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem", Err: ccf}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"bare", ccf, true},
		{"as the SDK returns it", asTheSDKReturnsIt, true},
		{"wrapped again", fmt.Errorf("renewing lease of pool p: %w", asTheSDKReturnsIt), true},
		{"joined", errors.Join(errors.New("other"), ccf), true},
		{"nil", nil, false},
		{"another service error", &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem",
			Err: &types.InternalServerError{Message: aws.String("internal server error")}}, false},
		{"a cancelled transaction", &types.TransactionCanceledException{Message: aws.String("ConditionalCheckFailed")}, false},
		{"a timeout", fmt.Errorf("renewing: %w", context.DeadlineExceeded), false},
		{"the message alone", errors.New("ConditionalCheckFailedException: The conditional request failed"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := table.ConditionFailed(tc.err); got != tc.want {
				t.Fatalf("ConditionFailed(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestAttributeValues: what the helpers write, they read back; absent or
// mistyped attributes read as zero.
func TestAttributeValues(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 5e6, time.UTC)
	item := table.Key(table.PoolPK("p"), table.JobSK(42))
	item["n"], item["at"], item["s"] = table.Num(-7), table.Millis(at), table.Str("x")
	item["set"] = &types.AttributeValueMemberNS{Value: []string{"3", "x", "9"}}
	if pk := item[table.PartitionKey].(*types.AttributeValueMemberS).Value; pk != "POOL#p" {
		t.Errorf("partition key %q, want POOL#p", pk)
	}
	if sk := item[table.SortKey].(*types.AttributeValueMemberS).Value; sk != "JOB#42" {
		t.Errorf("sort key %q, want JOB#42", sk)
	}
	if got := table.Int(item, "n"); got != -7 {
		t.Errorf("Int(n) = %d, want -7", got)
	}
	if got := table.Int(item, "at"); got != at.UnixMilli() {
		t.Errorf("Int(at) = %d, want %d", got, at.UnixMilli())
	}
	if got := table.Int(item, "s"); got != 0 {
		t.Errorf("Int of a string attribute = %d, want 0", got)
	}
	if got := table.Int(item, "absent"); got != 0 {
		t.Errorf("Int of an absent attribute = %d, want 0", got)
	}
	if got := table.IntSet(item, "set"); !slices.Equal(got, []int64{3, 9}) {
		t.Errorf("IntSet(set) = %v, want [3 9]", got)
	}
	if got := table.IntSet(item, "n"); got != nil {
		t.Errorf("IntSet of a number attribute = %v, want nil", got)
	}
}
