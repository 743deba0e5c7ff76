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

// Unrouted is a job no pool matched, as its latest delivery described it. Such
// jobs are kept (PK=UNROUTED, SK=JOB#<jobId>) so that an operator can see why they
// wait; they reserve nothing.
type Unrouted struct {
	JobID      int64    `dynamodbav:"jobId"`
	Repository string   `dynamodbav:"repository"`
	Labels     []string `dynamodbav:"labels"`
	// Reason says why no pool matched (pool.Config.Route).
	Reason     string `dynamodbav:"reason"`
	DeliveryID string `dynamodbav:"deliveryId"`
	State      State  `dynamodbav:"state"`
	// FirstSeen is when its first delivery was recorded.
	FirstSeen time.Time `dynamodbav:"-"`
	// Created is when GitHub created the job (Delivery.Created); not stored.
	Created time.Time `dynamodbav:"-"`

	FirstSeenMillis int64 `dynamodbav:"firstSeen"`
}

// RecordUnrouted keeps u for a day (DefaultRetention), moving its state only
// forward as Record does; a stale delivery changes nothing, and a `queued` that
// Record would find TooOld is not kept. Errors are DynamoDB failures.
func (s *Store) RecordUnrouted(ctx context.Context, u Unrouted) error {
	now := s.clock.Now()
	if (lifecycle{now: now, retention: s.retention}).tooOld(Delivery{State: u.State, Created: u.Created}) {
		return nil
	}
	labels, err := attributevalue.Marshal(u.Labels)
	if err != nil {
		return fmt.Errorf("encoding the labels of job %d: %w", u.JobID, err)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table),
		Key:       table.Key(table.UnroutedPK, table.JobSK(u.JobID)),
		UpdateExpression: aws.String("SET #state = :state, #job = :job, #repo = :repo, #labels = :labels, #reason = :reason, " +
			"#delivery = :delivery, #first = if_not_exists(#first, :now), #ttl = :ttl"),
		ConditionExpression: aws.String("attribute_not_exists(#state) OR #state < :state"),
		ExpressionAttributeNames: map[string]string{"#state": "state", "#job": "jobId", "#repo": "repository",
			"#labels": "labels", "#reason": "reason", "#delivery": "deliveryId", "#first": "firstSeen", "#ttl": table.TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":state": table.Num(int64(u.State)), ":job": table.Num(u.JobID), ":repo": table.Str(u.Repository),
			":labels": labels, ":reason": table.Str(u.Reason),
			":delivery": table.Str(u.DeliveryID), ":now": table.Millis(now),
			":ttl": table.Num(now.Add(s.retention).Unix()),
		},
	})
	if err != nil && !table.ConditionFailed(err) {
		return fmt.Errorf("recording unrouted job %d: %w", u.JobID, err)
	}
	return nil
}

// UnroutedQueued returns the unrouted jobs still queued, recorded within the last
// DefaultRetention (older items wait for TTL).
func (s *Store) UnroutedQueued(ctx context.Context) ([]Unrouted, error) {
	now := s.clock.Now()
	pages := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk"),
		FilterExpression:         aws.String("#state = :queued AND #first > :since"),
		ExpressionAttributeNames: map[string]string{"#pk": table.PartitionKey, "#state": "state", "#first": "firstSeen"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": table.Str(table.UnroutedPK), ":queued": table.Num(int64(Queued)),
			":since": table.Millis(now.Add(-s.retention)),
		},
	})
	var out []Unrouted
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("querying unrouted jobs: %w", err)
		}
		var us []Unrouted
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &us); err != nil {
			return nil, fmt.Errorf("decoding unrouted jobs: %w", err)
		}
		out = append(out, us...)
	}
	for i := range out {
		out[i].FirstSeen = time.UnixMilli(out[i].FirstSeenMillis).UTC()
	}
	return out, nil
}
