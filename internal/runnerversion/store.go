package runnerversion

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

// Store keeps Known in one deployment-level item (PK=TABLE, SK=RELEASE#runner).
type Store struct {
	db table.Table
}

// NewStore returns the store of tableName.
func NewStore(db table.API, tableName string) *Store {
	return &Store{db: table.Table{DB: db, Name: tableName}}
}

// ErrChanged: the item is no longer the one the caller read (another sweep
// wrote it in between).
var ErrChanged = errors.New("the runner releases item changed meanwhile")

type item struct {
	AttemptedAt string        `dynamodbav:"attemptedAt"`
	CheckedAt   time.Time     `dynamodbav:"checkedAt"`
	ETag        string        `dynamodbav:"etag"`
	Releases    []itemRelease `dynamodbav:"releases"`
	Error       string        `dynamodbav:"error,omitempty"`
}

type itemRelease struct {
	Version     string    `dynamodbav:"version"`
	PublishedAt time.Time `dynamodbav:"publishedAt"`
}

// stamp is how AttemptedAt is stored, so that a condition can compare it.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Get returns what is stored; a zero Known when nothing is.
func (s *Store) Get(ctx context.Context) (Known, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{Key: table.Key(table.DeploymentPK, table.RunnerReleasesSK), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Known{}, fmt.Errorf("reading the runner releases: %w", err)
	}
	if out.Item == nil {
		return Known{}, nil
	}
	var it item
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return Known{}, fmt.Errorf("decoding the runner releases: %w", err)
	}
	k := Known{CheckedAt: it.CheckedAt, ETag: it.ETag, Error: it.Error}
	if it.AttemptedAt != "" {
		if k.AttemptedAt, err = time.Parse(time.RFC3339Nano, it.AttemptedAt); err != nil {
			return Known{}, fmt.Errorf("decoding the runner releases: attemptedAt: %w", err)
		}
	}
	for _, r := range it.Releases {
		v, err := Parse(r.Version)
		if err != nil {
			return Known{}, fmt.Errorf("decoding the runner releases: %w", err)
		}
		k.Releases = append(k.Releases, Release{Version: v, PublishedAt: r.PublishedAt})
	}
	return k, nil
}

// Put writes k if the stored item's attempt is still prevAttempt (zero: no
// item yet); ErrChanged otherwise.
func (s *Store) Put(ctx context.Context, k Known, prevAttempt time.Time) error {
	it := item{AttemptedAt: stamp(k.AttemptedAt), CheckedAt: k.CheckedAt.UTC(), ETag: k.ETag, Error: k.Error,
		Releases: make([]itemRelease, len(k.Releases))}
	for i, r := range k.Releases {
		it.Releases[i] = itemRelease{Version: r.Version.String(), PublishedAt: r.PublishedAt.UTC()}
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return fmt.Errorf("encoding the runner releases: %w", err)
	}
	for key, v := range table.Key(table.DeploymentPK, table.RunnerReleasesSK) {
		av[key] = v
	}
	in := &dynamodb.PutItemInput{Item: av,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": table.PartitionKey}}
	if !prevAttempt.IsZero() {
		in.ConditionExpression = aws.String("attemptedAt = :prev")
		in.ExpressionAttributeNames = nil
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": &types.AttributeValueMemberS{Value: stamp(prevAttempt)}}
	}
	_, err = s.db.PutItem(ctx, in)
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return ErrChanged
	}
	if err != nil {
		return fmt.Errorf("writing the runner releases: %w", err)
	}
	return nil
}
