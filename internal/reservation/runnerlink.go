package reservation

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// The runner link: which jobs a runner took, as `in_progress` and `completed`
// deliveries name it, kept per runner (PK=RUNNER#<runner name>, SK=JOB#<jobId>)
// whatever pool the job was routed to — GitHub gives a job to any online runner
// whose labels cover the job's, so a runner can run another pool's job, or a job
// no pool reserved. The sweeper reads it, with strong consistency, right before it
// asks GitHub to remove a runner: a job on the runner without a `completed` vetoes
// the removal (package reconcile).
//
// Like a reservation, a link only moves forward (in_progress < completed) through
// one conditional write, so redelivered and reordered deliveries change nothing.

// RunnerJob is one job a runner took.
type RunnerJob struct {
	Runner string `dynamodbav:"runner"`
	JobID  int64  `dynamodbav:"jobId"`
	// Pool is the pool the job was routed to ("" when none was).
	Pool  string `dynamodbav:"pool"`
	State State  `dynamodbav:"state"`
	// AtMillis is when the delivery that moved the link to State was recorded.
	AtMillis int64 `dynamodbav:"at"`
	// StartedMillis is when its `in_progress` was recorded (0: none was, the
	// `completed` came first or alone).
	StartedMillis int64 `dynamodbav:"startedAt"`
}

// At is when the link's latest state was recorded.
func (j RunnerJob) At() time.Time { return time.UnixMilli(j.AtMillis).UTC() }

// DefaultLinkLifetime is how long a link of a job still in progress is kept
// after its `in_progress`, for a `completed` that never arrives: GitHub cancels a
// job after its timeout-minutes, 360 by default.
const DefaultLinkLifetime = 6 * time.Hour

// RecordRunner records that d's runner took d's job (in_progress) or finished it
// (completed). A delivery that names no runner, or is of another state, records
// nothing. It reports whether the link moved forward. Errors are DynamoDB
// failures after the SDK's retries; the webhook answers 503 so GitHub redelivers.
func (s *Store) RecordRunner(ctx context.Context, d Delivery) (Outcome, error) {
	if d.RunnerName == "" || d.State < InProgress {
		return Stale, nil
	}
	now := s.clock.Now()
	ttl := now.Add(DefaultLinkLifetime).Add(s.retention)
	if d.State == Completed {
		ttl = now.Add(s.retention)
	}
	update := "SET #state = :state, #runner = :runner, #job = :job, #pool = :pool, #at = :at, #ttl = :ttl"
	names := map[string]string{"#state": "state", "#runner": "runner", "#job": "jobId", "#pool": "pool", "#at": "at", "#ttl": table.TTLAttribute}
	if d.State == InProgress {
		update += ", #started = :at"
		names["#started"] = "startedAt"
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      table.Key(table.RunnerPK(d.RunnerName), table.JobSK(d.JobID)),
		UpdateExpression:         aws.String(update),
		ConditionExpression:      aws.String("attribute_not_exists(#state) OR #state < :state"),
		ExpressionAttributeNames: names,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":state":  table.Num(int64(d.State)),
			":runner": table.Str(d.RunnerName),
			":job":    table.Num(d.JobID),
			":pool":   table.Str(d.Pool),
			":at":     table.Millis(now),
			":ttl":    table.Num(ttl.Unix()),
		},
	})
	switch {
	case table.ConditionFailed(err):
		return Stale, nil
	case err != nil:
		return 0, fmt.Errorf("recording that runner %s took job %d (%s): %w", d.RunnerName, d.JobID, d.State, err)
	}
	return Applied, nil
}

// RunnerJobs returns every job linked to runner, finished or not, with a strongly
// consistent read: a delivery recorded before the call is in the answer. Links of
// finished jobs stay for the retention (a day), so an empty answer means no
// delivery named the runner in that time.
func (s *Store) RunnerJobs(ctx context.Context, runner string) ([]RunnerJob, error) {
	pages := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND begins_with(#sk, :job)"),
		ExpressionAttributeNames: map[string]string{"#pk": table.PartitionKey, "#sk": table.SortKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": table.Str(table.RunnerPK(runner)),
			":job": table.Str(table.JobSKPrefix)},
		ConsistentRead: aws.Bool(true),
	})
	var items []map[string]types.AttributeValue
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the jobs of runner %s: %w", runner, err)
		}
		items = append(items, page.Items...)
	}
	var jobs []RunnerJob
	if err := attributevalue.UnmarshalListOfMaps(items, &jobs); err != nil {
		return nil, fmt.Errorf("decoding the jobs of runner %s: %w", runner, err)
	}
	return jobs, nil
}
