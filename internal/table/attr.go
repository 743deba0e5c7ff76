package table

import (
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ConditionFailed reports whether err says DynamoDB refused a conditional write
// because its condition did not hold: the write changed nothing. It looks through
// wrapping (the SDK's operation error, fmt.Errorf's %w).
func ConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// Key is the primary key of the item (pk, sk).
func Key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{PartitionKey: Str(pk), SortKey: Str(sk)}
}

// Str is a string attribute value.
func Str(s string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: s} }

// Num is a number attribute value.
func Num(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// Millis is t as a number of milliseconds since the epoch.
func Millis(t time.Time) *types.AttributeValueMemberN { return Num(t.UnixMilli()) }

// Int is the integer in item's number attribute name; 0 when there is none.
func Int(item map[string]types.AttributeValue, name string) int64 {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(v.Value, 10, 64)
	return n
}

// IntSet is the integers in item's number set attribute name (nil when there is
// none), without the members that are not integers.
func IntSet(item map[string]types.AttributeValue, name string) []int64 {
	v, ok := item[name].(*types.AttributeValueMemberNS)
	if !ok {
		return nil
	}
	out := make([]int64, 0, len(v.Value))
	for _, s := range v.Value {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}
