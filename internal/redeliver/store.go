package redeliver

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// Store keeps, in the product's table, what the sweeper last saw in GitHub's
// log of the App's webhook deliveries (Undelivered). One deployment-level item
// (PK=TABLE, SK=WEBHOOK#deliveries), overwritten by each scheduled sweep that
// read the log, answers `runnerscaler status` when GitHub cannot reach the
// webhook at all — a case that leaves no reservation behind.
type Store struct {
	db table.Table
}

// NewStore returns the store of tableName.
func NewStore(db table.API, tableName string) *Store {
	return &Store{db: table.Table{DB: db, Name: tableName}}
}

// item is the stored form. Status codes are map keys as decimal strings.
type item struct {
	CheckedAt     time.Time      `dynamodbav:"checkedAt"`
	WindowSeconds int64          `dynamodbav:"windowSeconds"`
	ByStatus      map[string]int `dynamodbav:"byStatus"`
	Latest        *latest        `dynamodbav:"latest,omitempty"`
	Redelivered   int            `dynamodbav:"redelivered"`
}

type latest struct {
	At         time.Time `dynamodbav:"at"`
	StatusCode int       `dynamodbav:"statusCode"`
	Action     string    `dynamodbav:"action"`
	GUID       string    `dynamodbav:"guid"`
}

// Put replaces the item with u (one PutItem).
func (s *Store) Put(ctx context.Context, u Undelivered) error {
	it := item{CheckedAt: u.CheckedAt.UTC(), WindowSeconds: int64(u.Window / time.Second),
		ByStatus: make(map[string]int, len(u.ByStatus)), Redelivered: u.Redelivered}
	for code, n := range u.ByStatus {
		it.ByStatus[strconv.Itoa(code)] = n
	}
	if l := u.Latest; l != nil {
		it.Latest = &latest{At: l.At.UTC(), StatusCode: l.StatusCode, Action: l.Action, GUID: l.GUID}
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return fmt.Errorf("encoding the failed webhook deliveries: %w", err)
	}
	for k, v := range table.Key(table.DeploymentPK, table.DeliveryLogSK) {
		av[k] = v
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{Item: av}); err != nil {
		return fmt.Errorf("writing the failed webhook deliveries: %w", err)
	}
	return nil
}

// Get returns the item; false when no scheduled sweep has written it yet.
func (s *Store) Get(ctx context.Context) (Undelivered, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{Key: table.Key(table.DeploymentPK, table.DeliveryLogSK)})
	if err != nil {
		return Undelivered{}, false, fmt.Errorf("reading the failed webhook deliveries: %w", err)
	}
	if out.Item == nil {
		return Undelivered{}, false, nil
	}
	var it item
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return Undelivered{}, false, fmt.Errorf("decoding the failed webhook deliveries: %w", err)
	}
	u := Undelivered{CheckedAt: it.CheckedAt, Window: time.Duration(it.WindowSeconds) * time.Second,
		ByStatus: make(map[int]int, len(it.ByStatus)), Redelivered: it.Redelivered}
	for code, n := range it.ByStatus {
		c, err := strconv.Atoi(code)
		if err != nil {
			return Undelivered{}, false, fmt.Errorf("decoding the failed webhook deliveries: status %q: %w", code, err)
		}
		u.ByStatus[c] = n
	}
	if l := it.Latest; l != nil {
		u.Latest = &FailedDelivery{At: l.At, StatusCode: l.StatusCode, Action: l.Action, GUID: l.GUID}
	}
	return u, true, nil
}
