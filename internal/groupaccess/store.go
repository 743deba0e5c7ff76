package groupaccess

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/table"
)

// Store keeps one item per scope and group (PK=GROUPS, SK=<scope>#<group>).
type Store struct {
	db table.Table
}

// NewStore returns the store of tableName.
func NewStore(db table.API, tableName string) *Store {
	return &Store{db: table.Table{DB: db, Name: tableName}}
}

type item struct {
	Scope      string     `dynamodbav:"scope"`
	Group      string     `dynamodbav:"group"`
	GroupID    int64      `dynamodbav:"groupId"`
	Visibility string     `dynamodbav:"visibility"`
	ETag       string     `dynamodbav:"etag"`
	Pages      []itemPage `dynamodbav:"pages"`
	ReadAt     time.Time  `dynamodbav:"readAt"`
}

type itemPage struct {
	ETag         string   `dynamodbav:"etag"`
	Repositories []string `dynamodbav:"repositories"`
}

// Get returns what is stored of group of scope s; false when nothing is. The
// read is eventually consistent: an item written a moment ago may be missed.
func (st *Store) Get(ctx context.Context, s scope.Scope, group string) (Access, bool, error) {
	out, err := st.db.GetItem(ctx, &dynamodb.GetItemInput{Key: table.Key(table.GroupAccessPK, table.GroupAccessSK(s.String(), group))})
	if err != nil {
		return Access{}, false, fmt.Errorf("reading the access of runner group %q of %s: %w", group, s, err)
	}
	if out.Item == nil {
		return Access{}, false, nil
	}
	var it item
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return Access{}, false, fmt.Errorf("decoding the access of runner group %q of %s: %w", group, s, err)
	}
	a := Access{Scope: s, Group: group, GroupID: it.GroupID, Visibility: Visibility(it.Visibility), ETag: it.ETag, ReadAt: it.ReadAt}
	for _, p := range it.Pages {
		a.Pages = append(a.Pages, Page{ETag: p.ETag, Repositories: p.Repositories})
	}
	return a, true, nil
}

// Put writes a, replacing what was stored of its scope and group. A group
// whose repositories do not fit in one item (DynamoDB's 400 KB, about 5,000
// repositories) is stored Unchecked, without them: kept, the last list that
// fitted would refuse the repositories added since.
func (st *Store) Put(ctx context.Context, a Access) error {
	err := st.put(ctx, a)
	if tooLarge(err) && len(a.Pages) > 0 {
		return st.put(ctx, Access{Scope: a.Scope, Group: a.Group, GroupID: a.GroupID, Visibility: Unchecked, ReadAt: a.ReadAt})
	}
	return err
}

// tooLarge reports whether err is DynamoDB's refusal of an item over its size limit.
func tooLarge(err error) bool {
	var api interface {
		ErrorCode() string
		ErrorMessage() string
	}
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException" &&
		strings.Contains(api.ErrorMessage(), "Item size has exceeded the maximum allowed size")
}

func (st *Store) put(ctx context.Context, a Access) error {
	it := item{Scope: a.Scope.String(), Group: a.Group, GroupID: a.GroupID, Visibility: string(a.Visibility),
		ETag: a.ETag, ReadAt: a.ReadAt.UTC(), Pages: make([]itemPage, len(a.Pages))}
	for i, p := range a.Pages {
		it.Pages[i] = itemPage{ETag: p.ETag, Repositories: p.Repositories}
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return fmt.Errorf("encoding the access of runner group %q of %s: %w", a.Group, a.Scope, err)
	}
	for k, v := range table.Key(table.GroupAccessPK, table.GroupAccessSK(a.Scope.String(), a.Group)) {
		av[k] = v
	}
	if _, err := st.db.PutItem(ctx, &dynamodb.PutItemInput{Item: av}); err != nil {
		return fmt.Errorf("writing the access of runner group %q of %s: %w", a.Group, a.Scope, err)
	}
	return nil
}

// Stored names one group the store holds an item of: its scope
// (scope.Scope.String()) and its name.
type Stored struct {
	Scope string `dynamodbav:"scope"`
	Group string `dynamodbav:"group"`
}

// List names every group the store holds an item of (one Query of the
// GROUPS partition, its keys only).
func (st *Store) List(ctx context.Context) ([]Stored, error) {
	pages := dynamodb.NewQueryPaginator(st.db, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ProjectionExpression:      aws.String("#scope, #group"),
		ExpressionAttributeNames:  map[string]string{"#pk": table.PartitionKey, "#scope": "scope", "#group": "group"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": table.Str(table.GroupAccessPK)},
	})
	var out []Stored
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the runner groups' access: %w", err)
		}
		var items []Stored
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &items); err != nil {
			return nil, fmt.Errorf("decoding the runner groups' access: %w", err)
		}
		out = append(out, items...)
	}
	return out, nil
}

// Delete deletes the item of g; one already gone is no error.
func (st *Store) Delete(ctx context.Context, g Stored) error {
	_, err := st.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{Key: table.Key(table.GroupAccessPK, table.GroupAccessSK(g.Scope, g.Group))})
	if err != nil {
		return fmt.Errorf("deleting the access of runner group %q of %s: %w", g.Group, g.Scope, err)
	}
	return nil
}
