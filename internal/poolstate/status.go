// Package poolstate keeps what the sweeper knows of each pool between
// invocations, in the same DynamoDB table as the reservations: the pool's status
// item (PK=SWEEP#<pool>, SK=STATUS) — the last decision, the last scale-out and
// sync times, runner counts by phase, the latest failures: what ARC kept in the
// HorizontalRunnerAutoscaler status — written with optimistic concurrency.
package poolstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// ErrConflict means the status item changed since it was read (another writer won).
var ErrConflict = errors.New("pool status changed since it was read")

// Status is the pool status item.
type Status struct {
	Pool    string `dynamodbav:"pool"`
	Desired int    `dynamodbav:"desired"`
	// LastScaleOut is when desired last increased (start of the scale-down delay).
	LastScaleOut time.Time `dynamodbav:"lastScaleOut"`
	// LastSync is when the sweeper last created runners (ARC's sync time, compared
	// with the reservations' effective time for ephemeral pools).
	LastSync time.Time `dynamodbav:"lastSync"`
	// Phases counts runners by phase (pending, running, completed, terminating, ...).
	Phases map[string]int `dynamodbav:"phases"`
	// LastCleanup is when the reconciler last cleaned up what failed or interrupted
	// creations left (zero: due at the next sweep).
	LastCleanup time.Time `dynamodbav:"lastCleanup"`
	// Stuck names the runners that are not running, by why (an image that cannot
	// be pulled, an unschedulable pod, a crash loop, a pod the controller cannot
	// create), as the last sweep saw them.
	Stuck map[string]string `dynamodbav:"stuck,omitempty"`
	// Extended counts the reservations of waiting jobs the last sweep extended.
	Extended int `dynamodbav:"extended,omitempty"`
	// Deferred says what the last sweep did not ask GitHub, its installation
	// being near the rate limit ("" when nothing was deferred).
	Deferred string `dynamodbav:"deferred,omitempty"`
	// Foreign names the objects the last sweep found in the pool's namespace
	// that claim to be its runners' (its label, this deployment's
	// annotation) but are tied to no runner on its roster by UID: left alone.
	Foreign []string `dynamodbav:"foreign,omitempty"`
	// Failed: the last sweep's reconcile failed. Errors keeps the latest failures
	// (see RecordOutcome).
	Failed bool         `dynamodbav:"failed,omitempty"`
	Errors []SweepError `dynamodbav:"errors,omitempty"`
	// DecidedAt and Reason describe the last decision.
	DecidedAt time.Time `dynamodbav:"decidedAt"`
	Reason    string    `dynamodbav:"reason"`
	// NextChange is when the decision may change with no new delivery (zero: none).
	NextChange time.Time `dynamodbav:"nextChange"`
	// Scope is the pool's scope (scope.Scope.String) from the pools file, which
	// the reconciler records at every sweep of the pool while the pool is in the
	// file and wants runners: once the pool is removed from the file, its runners
	// are drained only in this scope (or in one a pool of the file has), never in
	// one their own objects name.
	Scope string `dynamodbav:"scope,omitempty"`
	// Version increments on every write; a write must name the version it read.
	Version int64 `dynamodbav:"version"`
}

// Store reads and writes pool status items.
type Store struct {
	db table.Table
}

// NewStore returns a status store over tableName.
func NewStore(db table.API, tableName string) *Store {
	return &Store{db: table.Table{DB: db, Name: tableName}}
}

func itemKey(pool string) map[string]types.AttributeValue {
	return table.Key(table.SweepPK(pool), table.StatusSK)
}

// Get returns the pool's status; a pool never swept has the zero Status (version 0).
func (s *Store) Get(ctx context.Context, pool string) (Status, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		Key: itemKey(pool), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Status{}, fmt.Errorf("reading status of pool %s: %w", pool, err)
	}
	st := Status{Pool: pool}
	if out.Item == nil {
		return st, nil
	}
	if err := attributevalue.UnmarshalMap(out.Item, &st); err != nil {
		return Status{}, fmt.Errorf("decoding status of pool %s: %w", pool, err)
	}
	return st, nil
}

// Put writes st if the stored version is still st.Version (absent for version 0)
// and returns the status as written, with its new version. ErrConflict means
// someone else wrote first; re-read and decide again.
func (s *Store) Put(ctx context.Context, st Status) (Status, error) {
	read := st.Version
	st.Version++
	item, err := attributevalue.MarshalMap(st)
	if err != nil {
		return Status{}, fmt.Errorf("encoding status of pool %s: %w", st.Pool, err)
	}
	for k, v := range itemKey(st.Pool) {
		item[k] = v
	}
	cond, values := "attribute_not_exists(#v)", map[string]types.AttributeValue(nil)
	if read > 0 {
		cond = "#v = :read"
		values = map[string]types.AttributeValue{":read": table.Num(read)}
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		Item: item, ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: map[string]string{"#v": "version"}, ExpressionAttributeValues: values,
	})
	switch {
	case table.ConditionFailed(err):
		return Status{}, fmt.Errorf("writing status of pool %s at version %d: %w", st.Pool, read, ErrConflict)
	case err != nil:
		return Status{}, fmt.Errorf("writing status of pool %s: %w", st.Pool, err)
	}
	return st, nil
}
