package rerun

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// Retention is how long candidates, deaths and budgets are kept: a run can be
// re-run for 30 days, and a re-run may fail again days after the first.
const Retention = 31 * 24 * time.Hour

// Store keeps candidates, deaths and budgets in the deployment's table: a
// candidate in its runner's pool's partition (table.PoolPK, which the webhook
// writes), a death in its runner's (table.DeathsPK), and a workflow run's
// budget and calls in the run's (table.RunPK); only the sweeper writes the
// last two.
type Store struct {
	db table.Table
}

// NewStore returns a store over tableName.
func NewStore(db table.API, tableName string) *Store {
	return &Store{db: table.Table{DB: db, Name: tableName}}
}

// Record stores a new candidate, pending in the pool's part of the active
// index. It reports false, writing nothing, when the job already has one (a
// redelivered `completed`).
func (s *Store) Record(ctx context.Context, c Candidate, now time.Time) (bool, error) {
	c.RecordedMillis, c.Decision = now.UnixMilli(), Pending
	item, err := attributevalue.MarshalMap(c)
	if err != nil {
		return false, fmt.Errorf("encoding the re-run candidate of job %d: %w", c.JobID, err)
	}
	item[table.ActiveKey] = table.Str(table.PendingRerunsKey(c.Pool))
	item[table.TTLAttribute] = table.Num(now.Add(Retention).Unix())
	names, values, set := map[string]string{"#pk": table.PartitionKey}, map[string]types.AttributeValue{}, ""
	i := 0
	for k, v := range item {
		names[fmt.Sprintf("#a%d", i)], values[fmt.Sprintf(":a%d", i)] = k, v
		set += fmt.Sprintf(", #a%d = :a%d", i, i)
		i++
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		Key:                       table.Key(table.PoolPK(c.Pool), table.RerunSK(c.JobID)),
		UpdateExpression:          aws.String("SET " + set[2:]),
		ConditionExpression:       aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	switch {
	case table.ConditionFailed(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("recording the failure of job %d on runner %s: %w", c.JobID, c.Runner, err)
	}
	return true, nil
}

// Pending returns the pool's undecided candidates.
func (s *Store) Pending(ctx context.Context, pool string) ([]Candidate, error) {
	pages := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		IndexName:                 aws.String(table.ActiveIndex),
		KeyConditionExpression:    aws.String("#active = :key"),
		ExpressionAttributeNames:  map[string]string{"#active": table.ActiveKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":key": table.Str(table.PendingRerunsKey(pool))},
	})
	var out []Candidate
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the failed jobs of pool %s: %w", pool, err)
		}
		var cs []Candidate
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &cs); err != nil {
			return nil, fmt.Errorf("decoding the failed jobs of pool %s: %w", pool, err)
		}
		out = append(out, cs...)
	}
	return out, nil
}

// Get returns the candidate of job in pool, if there is one.
func (s *Store) Get(ctx context.Context, pool string, job int64) (Candidate, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{Key: table.Key(table.PoolPK(pool), table.RerunSK(job)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Candidate{}, false, fmt.Errorf("reading the re-run of job %d: %w", job, err)
	}
	if out.Item == nil {
		return Candidate{}, false, nil
	}
	var c Candidate
	if err := attributevalue.UnmarshalMap(out.Item, &c); err != nil {
		return Candidate{}, false, fmt.Errorf("decoding the re-run of job %d: %w", job, err)
	}
	return c, true, nil
}

// ErrDecided: another sweeper decided the candidate first.
var ErrDecided = errors.New("rerun: the job was decided already")

// Decide writes c's outcome, cause and reason and takes it out of the pending
// index; only a pending candidate is decided (ErrDecided otherwise).
func (s *Store) Decide(ctx context.Context, c Candidate, now time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		Key:                 table.Key(table.PoolPK(c.Pool), table.RerunSK(c.JobID)),
		UpdateExpression:    aws.String("SET #outcome = :outcome, #cause = :cause, #reason = :reason, #decided = :now, #tries = :tries REMOVE #active"),
		ConditionExpression: aws.String("attribute_exists(#active)"),
		ExpressionAttributeNames: map[string]string{"#outcome": "outcome", "#cause": "cause", "#reason": "reason",
			"#decided": "decidedAt", "#tries": "tries", "#active": table.ActiveKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":outcome": table.Str(string(c.Decision)),
			":cause": table.Str(c.Cause), ":reason": table.Str(c.Reason), ":now": table.Millis(now), ":tries": table.Num(int64(c.Tries))},
	})
	switch {
	case table.ConditionFailed(err):
		return ErrDecided
	case err != nil:
		return fmt.Errorf("recording the re-run decision of job %d: %w", c.JobID, err)
	}
	return nil
}

// Later records that GitHub refused c's re-run for now: it is asked again at next.
func (s *Store) Later(ctx context.Context, c Candidate, next time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		Key:                 table.Key(table.PoolPK(c.Pool), table.RerunSK(c.JobID)),
		UpdateExpression:    aws.String("SET #reason = :reason, #tries = :tries, #next = :next, #cause = :cause"),
		ConditionExpression: aws.String("attribute_exists(#active)"),
		ExpressionAttributeNames: map[string]string{"#reason": "reason", "#tries": "tries", "#next": "nextTry",
			"#cause": "cause", "#active": table.ActiveKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":reason": table.Str(c.Reason),
			":tries": table.Num(int64(c.Tries)), ":next": table.Millis(next), ":cause": table.Str(c.Cause)},
	})
	if err != nil && !table.ConditionFailed(err) {
		return fmt.Errorf("recording the refused re-run of job %d: %w", c.JobID, err)
	}
	return nil
}

// runKey is the item of c's workflow run that holds its budget and calls: one
// per run (repository and run id), whichever pools its jobs ran in.
func runKey(c Candidate) map[string]types.AttributeValue {
	return table.Key(table.RunPK(c.Repository, c.RunID), table.RerunsSK)
}

// Charge takes one re-run of c's workflow run from its budget and reports
// whether it could: the run's re-runs, counted over all the pools its jobs ran
// in, stay below max (the charging pool's rerunsPerRun). Charging the same job
// again is free and answers true: a sweeper that retries a refused re-run, or
// one killed between the charge and the call, does not spend the budget twice.
func (s *Store) Charge(ctx context.Context, c Candidate, max int, now time.Time) (bool, error) {
	key := runKey(c)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		Key:                      key,
		UpdateExpression:         aws.String("ADD #n :one, #jobs :job SET #ttl = :ttl"),
		ConditionExpression:      aws.String("attribute_not_exists(#n) OR (#n < :max AND NOT contains(#jobs, :id))"),
		ExpressionAttributeNames: map[string]string{"#n": "reruns", "#jobs": "jobs", "#ttl": table.TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": table.Num(1), ":max": table.Num(int64(max)),
			":job": &types.AttributeValueMemberNS{Value: []string{fmt.Sprint(c.JobID)}}, ":id": table.Num(c.JobID),
			":ttl": table.Num(now.Add(Retention).Unix())},
	})
	if err == nil {
		return true, nil
	}
	if !table.ConditionFailed(err) {
		return false, fmt.Errorf("charging the re-run budget of run %d: %w", c.RunID, err)
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, fmt.Errorf("reading the re-run budget of run %d: %w", c.RunID, err)
	}
	for _, id := range table.IntSet(out.Item, "jobs") {
		if id == c.JobID {
			return true, nil
		}
	}
	return false, nil
}

// callPrefix begins the attribute of the budget item that records the call
// from one attempt (call<attempt> = the candidate's job).
const callPrefix = "call"

// Claim records, before the call is made, that this deployment re-runs c's job
// from attempt from of its run, unless it recorded a call for another job from
// that attempt; it returns the job whose call from that attempt is recorded
// (c.JobID: c's). A run moves to a new attempt with each re-run, so one call
// per attempt is all GitHub lets through; the calls are the run's, shared by
// the sweepers of all the pools its jobs ran in.
func (s *Store) Claim(ctx context.Context, c Candidate, from int, now time.Time) (int64, error) {
	key := runKey(c)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		Key:                      key,
		UpdateExpression:         aws.String("SET #call = :job, #ttl = if_not_exists(#ttl, :ttl)"),
		ConditionExpression:      aws.String("attribute_not_exists(#call) OR #call = :job"),
		ExpressionAttributeNames: map[string]string{"#call": callPrefix + strconv.Itoa(from), "#ttl": table.TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":job": table.Num(c.JobID),
			":ttl": table.Num(now.Add(Retention).Unix())},
	})
	switch {
	case err == nil:
		return c.JobID, nil
	case !table.ConditionFailed(err):
		return 0, fmt.Errorf("recording the re-run call of job %d from attempt %d: %w", c.JobID, from, err)
	}
	calls, err := s.Calls(ctx, c)
	return calls[from], err
}

// Release gives back c's claim on attempt from of its run and c's charge of
// the run's budget: GitHub answered c's call from that attempt with a refusal,
// so the call did not move the run, and the run's other jobs may claim that
// attempt and the budget rather than wait behind it. A claim on that attempt
// for another job, or none, is left as it is.
func (s *Store) Release(ctx context.Context, c Candidate, from int) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		Key:                      runKey(c),
		UpdateExpression:         aws.String("REMOVE #call DELETE #jobs :job ADD #n :minusOne"),
		ConditionExpression:      aws.String("#call = :id AND contains(#jobs, :id)"),
		ExpressionAttributeNames: map[string]string{"#call": callPrefix + strconv.Itoa(from), "#jobs": "jobs", "#n": "reruns"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": table.Num(c.JobID), ":minusOne": table.Num(-1),
			":job": &types.AttributeValueMemberNS{Value: []string{fmt.Sprint(c.JobID)}}},
	})
	if err != nil && !table.ConditionFailed(err) {
		return fmt.Errorf("releasing the re-run call of job %d from attempt %d: %w", c.JobID, from, err)
	}
	return nil
}

// Calls returns the re-run calls recorded for c's workflow run (Claim), by
// any pool's sweeper.
func (s *Store) Calls(ctx context.Context, c Candidate) (Calls, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{Key: runKey(c), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("reading the re-run calls of run %d: %w", c.RunID, err)
	}
	calls := Calls{}
	for name, v := range out.Item {
		attempt, err := strconv.Atoi(strings.TrimPrefix(name, callPrefix))
		n, ok := v.(*types.AttributeValueMemberN)
		if !strings.HasPrefix(name, callPrefix) || err != nil || !ok {
			continue
		}
		if job, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			calls[attempt] = job
		}
	}
	return calls, nil
}

// RecordDeath stores a death of a runner (once per Death.Key).
func (s *Store) RecordDeath(ctx context.Context, d Death, now time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		Key: table.Key(table.DeathsPK(d.Runner), table.DeathSK(d.Key())),
		UpdateExpression: aws.String("SET #runner = :runner, #cause = :cause, #from = :from, #to = :to, #deleted = :deleted, " +
			"#killed = :killed, #repeated = :repeated, #ttl = :ttl"),
		ExpressionAttributeNames: map[string]string{"#runner": "runner", "#cause": "cause", "#from": "from", "#to": "to",
			"#deleted": "deleted", "#killed": "killed", "#repeated": "repeated", "#ttl": table.TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":runner": table.Str(d.Runner), ":cause": table.Str(d.Cause),
			":from": table.Num(d.FromMillis), ":to": table.Num(d.ToMillis), ":deleted": &types.AttributeValueMemberBOOL{Value: d.Deleted},
			":killed": &types.AttributeValueMemberBOOL{Value: d.Killed}, ":repeated": &types.AttributeValueMemberBOOL{Value: d.Repeated},
			":ttl": table.Num(now.Add(Retention).Unix())},
	})
	if err != nil {
		return fmt.Errorf("recording the death of runner %s: %w", d.Runner, err)
	}
	return nil
}

// Deaths returns the deaths recorded for runner, strongly consistent.
func (s *Store) Deaths(ctx context.Context, runner string) ([]Death, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:   aws.String("#pk = :pk AND begins_with(#sk, :died)"),
		ExpressionAttributeNames: map[string]string{"#pk": table.PartitionKey, "#sk": table.SortKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": table.Str(table.DeathsPK(runner)),
			":died": table.Str(table.DeathSKPrefix)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the deaths of runner %s: %w", runner, err)
	}
	var ds []Death
	if err := attributevalue.UnmarshalListOfMaps(out.Items, &ds); err != nil {
		return nil, fmt.Errorf("decoding the deaths of runner %s: %w", runner, err)
	}
	return ds, nil
}
