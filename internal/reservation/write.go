package reservation

import (
	"context"
	"fmt"
	"maps"
	"reflect"

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
	for range maxRecordTries {
		r, exists, err := s.get(ctx, d.Pool, d.JobID)
		if err != nil {
			return 0, err
		}
		next, out := lifecycle{now: s.clock.Now(), retention: s.retention}.transition(r, exists, d)
		if out == Stale || out == TooOld {
			return out, nil
		}
		err = s.write(ctx, r, exists, next)
		switch {
		case table.ConditionFailed(err):
			continue
		case err != nil:
			return 0, fmt.Errorf("recording %s of job %d in pool %s: %w", d.State, d.JobID, d.Pool, err)
		}
		return out, nil
	}
	return 0, fmt.Errorf("recording %s of job %d in pool %s: other writes to the job kept changing it", d.State, d.JobID, d.Pool)
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
