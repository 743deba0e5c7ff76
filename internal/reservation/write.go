package reservation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// How a transition's result reaches the table: one UpdateItem that sets the
// attributes that changed and removes those that went, conditioned on the
// item being as read — absent, or at the version read. Every write to a job's
// item adds one to its version (versionAttr), the sweeper's too (Extend,
// move), so a write decided on an item another write changed since is
// refused, and the delivery is decided again on the item as it is now.

// versionAttr counts the writes to a job's item.
const versionAttr = "version"

// heldAttr is present, true, on the item of a job held for its approval
// (Held): the active index's filter leaves it out (activeFilter).
const heldAttr = "held"

// maxRecordTries bounds Record's read-decide-write rounds; each lost round
// means another write to the job's item came first.
const maxRecordTries = 5

// Record applies d to its job's item: it reads the item, decides with
// transition, and writes the result on condition that the item is as read.
// Stale and TooOld write nothing. Errors are DynamoDB failures after the
// SDK's retries; the caller should report them so GitHub can redeliver.
func (s *Store) Record(ctx context.Context, d Delivery) (Outcome, error) {
	out, err := s.decide(ctx, d.Pool, d.JobID, func(l lifecycle, r Reservation, exists bool) (Reservation, Outcome) {
		return l.transition(r, exists, d)
	})
	if err != nil {
		return 0, fmt.Errorf("recording %s of job %d in pool %s: %w", d.State, d.JobID, d.Pool, err)
	}
	return out, nil
}

// Checked applies GitHub's answer about the held job of pool (status: one of
// the GitHub* constants), as lifecycle.checked says; duration restarts its
// reservation when it is released or moves forward. A job not held any more,
// or without an item, is Stale.
func (s *Store) Checked(ctx context.Context, pool string, job int64, status string, duration time.Duration) (Outcome, error) {
	out, err := s.decide(ctx, pool, job, func(l lifecycle, r Reservation, exists bool) (Reservation, Outcome) {
		if !exists {
			return r, Stale
		}
		return l.checked(r, status, Delivery{Pool: r.Pool, JobID: r.JobID, RunID: r.RunID, Repository: r.Repository,
			Amount: r.Amount, Duration: duration})
	})
	if err != nil {
		return 0, fmt.Errorf("recording GitHub's %s for held job %d in pool %s: %w", status, job, pool, err)
	}
	return out, nil
}

// decide reads the job's item, decides its next state with next, and writes
// it on condition that the item is as read, reading again when another write
// came first. Stale and TooOld write nothing.
func (s *Store) decide(ctx context.Context, pool string, job int64, next func(lifecycle, Reservation, bool) (Reservation, Outcome)) (Outcome, error) {
	for range maxRecordTries {
		r, exists, err := s.get(ctx, pool, job)
		if err != nil {
			return 0, err
		}
		after, out := next(lifecycle{now: s.clock.Now(), retention: s.retention}, r, exists)
		if out == Stale || out == TooOld {
			return out, nil
		}
		err = s.write(ctx, r, exists, after)
		switch {
		case table.ConditionFailed(err):
			continue
		case err != nil:
			return 0, err
		}
		return out, nil
	}
	return 0, errors.New("other writes to the job kept changing it")
}

// HeldSince returns the pool's jobs held for their approval since before
// cutoff (their `waiting` recorded then): the jobs whose approval the sweeper
// may ask GitHub about (Checked). It reads the active index, where held jobs
// stay.
func (s *Store) HeldSince(ctx context.Context, pool string, cutoff time.Time) ([]Reservation, error) {
	items, err := s.query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(table.ActiveIndex),
		KeyConditionExpression:    aws.String("#active = :pk"),
		FilterExpression:          aws.String("attribute_exists(#held)"),
		ExpressionAttributeNames:  map[string]string{"#active": table.ActiveKey, "#held": heldAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": table.Str(table.PoolPK(pool))},
	}, pool)
	if err != nil {
		return nil, err
	}
	rs, err := decode(items, pool)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(rs, func(r Reservation) bool {
		return !r.Held() || r.SeenWaiting.At().After(cutoff)
	}), nil
}

// write stores next over prev (exists: the item read), in one conditional
// UpdateItem.
func (s *Store) write(ctx context.Context, prev Reservation, exists bool, next Reservation) error {
	after, err := attributes(next)
	if err != nil {
		return err
	}
	before := map[string]types.AttributeValue{}
	if exists {
		if before, err = attributes(prev); err != nil {
			return err
		}
	}
	var update expression.UpdateBuilder
	for name, v := range after {
		if !reflect.DeepEqual(before[name], v) {
			update = update.Set(expression.Name(name), expression.Value(v))
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			update = update.Remove(expression.Name(name))
		}
	}
	update = update.Add(expression.Name(versionAttr), expression.Value(1))
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(asRead(prev, exists)).Build()
	if err != nil {
		return fmt.Errorf("building the write of job %d: %w", next.JobID, err)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       table.Key(table.PoolPK(next.Pool), table.JobSK(next.JobID)),
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	return err
}

// asRead is the condition that the job's item is as prev shows it: absent,
// or at prev's version.
func asRead(prev Reservation, exists bool) expression.ConditionBuilder {
	if !exists {
		return expression.AttributeNotExists(expression.Name(table.PartitionKey))
	}
	if prev.Version == 0 {
		return expression.AttributeExists(expression.Name(table.PartitionKey)).
			And(expression.AttributeNotExists(expression.Name(versionAttr)))
	}
	return expression.Name(versionAttr).Equal(expression.Value(prev.Version))
}

// attributes is r as its item stores it, with what is derived from it: the
// active index's key while the job is unfinished, the held mark while it is
// held. The version is left to the write (it only grows).
func attributes(r Reservation) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(r)
	if err != nil {
		return nil, fmt.Errorf("encoding job %d: %w", r.JobID, err)
	}
	delete(item, versionAttr)
	if r.State < Completed {
		item[table.ActiveKey] = table.Str(table.PoolPK(r.Pool))
	}
	if r.Held() {
		item[heldAttr] = &types.AttributeValueMemberBOOL{Value: true}
	}
	return maps.Clone(item), nil
}
