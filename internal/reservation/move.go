package reservation

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/table"
)

// Moves. A job's item lives in the partition of the pool the webhook routed it
// to, its home, and the job is counted in exactly one pool: the one its item's
// countedIn names, or its home when countedIn is absent. Two things move the
// count: a runner of another pool that takes the job (FollowRunner) and a
// sweeper that spills a queued job of a saturated pool to its overflow pool
// (Spill).
//
// A move writes a pointer in the new pool's partition first (PK=POOL#<pool>,
// SK=MOVED#<jobId>, naming the home), then sets countedIn on the home item with
// one conditional UpdateItem whose condition is the countedIn it expects. So
// whenever the home item names a pool other than the home, that pool's
// partition holds a pointer to it; Active reads each pointer's home item with
// strong consistency and counts it only if countedIn still names the pool. A
// pointer left behind by a move that lost its condition, by a crash between the
// two writes, or by a later move, counts nothing; the home item alone decides.
// Redelivered and reordered deliveries, and two sweepers, move nothing twice:
// each finds the expected value gone. A `waiting` brings a spilled job's count
// home (hold): its approval may come after the pointer's TTL.

// MoveReason says why a job is counted outside its home pool.
type MoveReason string

// Reasons a job's count moved.
const (
	// MovedByRunner: a runner of the counting pool took the job.
	MovedByRunner MoveReason = "runner"
	// MovedBySpill: the job's pool was saturated and spilled it to its overflow pool.
	MovedBySpill MoveReason = "spill"
)

// CountsIn is the pool that counts the job: its countedIn, or else its home.
func (r Reservation) CountsIn() string {
	if r.CountedIn == "" {
		return r.Pool
	}
	return r.CountedIn
}

// Moved reports whether the job is counted outside its home pool.
func (r Reservation) Moved() bool { return r.CountsIn() != r.Pool }

// maxMoveTries bounds FollowRunner's read-decide-write rounds; each lost round
// means another move of the same job was recorded meanwhile.
const maxMoveTries = 5

// FollowRunner moves the count of job, routed to home, to runnerPool, the
// pool of the runner that took it: whatever pool counted the job, the pool
// whose runner runs it counts it from now on, and the pool that counted it is
// free to serve its next job. It reports whether it moved the count, and from
// which pool; a job already counted in runnerPool, or without an item (its
// deliveries not recorded), is not moved. Errors are DynamoDB failures after
// the SDK's retries.
func (s *Store) FollowRunner(ctx context.Context, home string, job int64, runnerPool string) (from string, moved bool, err error) {
	for range maxMoveTries {
		r, ok, err := s.get(ctx, home, job)
		if err != nil || !ok {
			return "", false, err
		}
		if r.CountsIn() == runnerPool {
			return "", false, nil
		}
		done, err := s.move(ctx, r, runnerPool, MovedByRunner, false)
		if err != nil || done {
			return r.CountsIn(), done, err
		}
	}
	return "", false, fmt.Errorf("moving job %d of pool %s to pool %s: other moves of the job kept changing it", job, home, runnerPool)
}

// Spill moves the count of r, a queued job counted in from, to the pool to,
// if the job is still queued and still counted in from. It reports whether it
// moved it; false means the job moved on, or another sweeper moved it first.
func (s *Store) Spill(ctx context.Context, r Reservation, from, to string) (bool, error) {
	if r.CountsIn() != from || to == from {
		return false, nil
	}
	return s.move(ctx, r, to, MovedBySpill, true)
}

// move writes the pointer in to's partition (a completed job, which counts
// nowhere, needs none), then sets the home item's
// countedIn from what r shows to to (removes it when to is the home). done is
// false, with the pointer maybe written and the item unchanged, when the item
// no longer shows r's countedIn (or, with queuedOnly, is no longer queued).
func (s *Store) move(ctx context.Context, r Reservation, to string, why MoveReason, queuedOnly bool) (done bool, err error) {
	if to != r.Pool && r.State < Completed {
		if err := s.putPointer(ctx, r, to); err != nil {
			return false, err
		}
	}
	names := map[string]string{"#state": "state", "#counted": "countedIn", "#version": versionAttr}
	values := map[string]types.AttributeValue{":one": table.Num(1)}
	update := "REMOVE #counted ADD #version :one"
	if to != r.Pool {
		names["#why"] = "movedBy"
		values[":to"], values[":why"] = table.Str(to), table.Str(string(why))
		update = "SET #counted = :to, #why = :why ADD #version :one"
	}
	cond := "attribute_exists(#state) AND attribute_not_exists(#counted)"
	if r.CountedIn != "" {
		values[":from"] = table.Str(r.CountedIn)
		cond = "attribute_exists(#state) AND #counted = :from"
	}
	if queuedOnly {
		values[":queued"] = table.Num(int64(Queued))
		cond += " AND #state = :queued"
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       table.Key(table.PoolPK(r.Pool), table.JobSK(r.JobID)),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: nonEmpty(values),
	})
	switch {
	case table.ConditionFailed(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("moving job %d of pool %s to pool %s: %w", r.JobID, r.Pool, to, err)
	}
	return true, nil
}

// nonEmpty is values, or nil when it has none: DynamoDB refuses an empty map.
func nonEmpty(values map[string]types.AttributeValue) map[string]types.AttributeValue {
	if len(values) == 0 {
		return nil
	}
	return values
}

// putPointer writes the pointer to r's job in pool's partition. Its TTL is a
// retention past its home's as read, so it outlives every change a later
// delivery or extension makes to the home's while the job can still count.
func (s *Store) putPointer(ctx context.Context, r Reservation, pool string) error {
	ttl := r.TTL
	if ttl == 0 {
		ttl = s.clock.Now().Add(s.retention).Unix()
	}
	item := table.Key(table.PoolPK(pool), table.MovedSK(r.JobID))
	item["home"], item["jobId"] = table.Str(r.Pool), table.Num(r.JobID)
	item[table.TTLAttribute] = table.Num(ttl + int64(s.retention.Seconds()))
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	if err != nil {
		return fmt.Errorf("pointing pool %s at job %d of pool %s: %w", pool, r.JobID, r.Pool, err)
	}
	return nil
}

// Job is the job as routing sees it: its repository, scope and labels.
func (r Reservation) Job() pool.Job {
	return pool.Job{Repository: r.Repository, Organization: r.Organization, Enterprise: r.Enterprise, Labels: r.Labels}
}
