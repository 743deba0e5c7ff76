// Package roster is the deployment's record of the runners it created: one
// item per runner, in its pool's roster partition (table.RosterPK), named by
// the runner's GitHub name (its pod's). The item is the runner's identity:
// its pool, namespace and scope, and the UIDs of the Kubernetes objects the
// sweeper made for it or saw its StatefulSet make — the StatefulSet, its
// Secret, every pod it has had — and its GitHub runner id once known.
//
// The sweeper adds a runner before anything of it exists, records each UID as
// the object appears, and retires it when its last object goes. A retired
// runner moves to the pool's retired partition (table.RetiredRosterPK) for
// Linger, so that a late or redelivered delivery about its last job still
// counts as this deployment's, and DynamoDB's TTL then deletes it; a sweep
// reads only the live partition.
//
// The roster, not a name, a label or an annotation, is what makes an object
// or a runner this deployment's: anyone who can create a pod or a Secret in a
// runner namespace can give it any name, label and annotation, but not a UID
// the sweeper recorded. Only the sweeper's role may write the roster
// partitions; the webhook's may only read them (template.yaml).
package roster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// Linger is how long a retired runner stays on the roster: GitHub lets a
// delivery be redelivered for 3 days.
const Linger = 3 * 24 * time.Hour

// Runner is a runner's identity, as the sweeper recorded it.
type Runner struct {
	// Pool and Name (its GitHub name, its pod's) are its key.
	Pool, Name string
	// Namespace is where its objects live; Scope is the pool's scope
	// (scope.Scope.String()) where it registers.
	Namespace, Scope string
	// StatefulSetUID and SecretUID: the objects the sweeper created for it,
	// empty until recorded.
	StatefulSetUID, SecretUID string
	// PodUIDs: every pod its StatefulSet has had, as the sweeper saw them.
	PodUIDs []string
	// GitHubID is its GitHub runner id, 0 until known.
	GitHubID int64
	// Created: when it was added; Retired: when it was retired (zero while live).
	Created, Retired time.Time
}

// HasPod reports whether uid is one of the runner's pods.
func (r Runner) HasPod(uid string) bool { return uid != "" && slices.Contains(r.PodUIDs, uid) }

// Record is what the sweeper learned of a runner: each field set is recorded
// (a UID only where none, or the same, is recorded yet).
type Record struct {
	StatefulSetUID, SecretUID, PodUID string
	GitHubID                          int64
}

// ErrNotRecorded: the record was refused — the runner is not live on the
// roster, or it already records another UID or id for the object: the object
// offered is not the runner's.
var ErrNotRecorded = errors.New("not the runner's: the roster records another object, or no live runner")

// Store keeps the roster in the deployment's table.
type Store struct {
	db table.Table
}

// NewStore returns a roster over tableName.
func NewStore(db table.API, tableName string) *Store {
	return &Store{db: table.Table{DB: db, Name: tableName}}
}

// Attribute names of a roster item.
const (
	attrNamespace = "namespace"
	attrScope     = "scope"
	attrSTS       = "statefulSetUID"
	attrSecret    = "secretUID"
	attrPods      = "podUIDs"
	attrGitHubID  = "githubID"
	attrCreated   = "createdAt"
	attrRetired   = "retiredAt"
)

// Add puts rn on its pool's roster, live; a runner of that name already
// there is an error (names are random: a second Add is a bug).
func (s *Store) Add(ctx context.Context, rn Runner, now time.Time) error {
	rn.Created = now
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{Item: item(table.RosterPK(rn.Pool), rn),
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": table.PartitionKey}})
	if err != nil {
		return fmt.Errorf("adding runner %s to the roster of pool %s: %w", rn.Name, rn.Pool, err)
	}
	return nil
}

// Record records what the sweeper learned of the live runner name of pool.
// ErrNotRecorded (wrapped): the runner is not live, or records another UID or
// id for one of the objects given.
func (s *Store) Record(ctx context.Context, pool, name string, rec Record) error {
	names := map[string]string{"#pk": table.PartitionKey}
	values := map[string]types.AttributeValue{}
	cond := "attribute_exists(#pk)"
	var set []string
	one := func(attr, alias string, v types.AttributeValue) {
		names["#"+alias], values[":"+alias] = attr, v
		cond += fmt.Sprintf(" AND (attribute_not_exists(#%[1]s) OR #%[1]s = :%[1]s)", alias)
		set = append(set, fmt.Sprintf("#%[1]s = :%[1]s", alias))
	}
	if rec.StatefulSetUID != "" {
		one(attrSTS, "sts", table.Str(rec.StatefulSetUID))
	}
	if rec.SecretUID != "" {
		one(attrSecret, "sec", table.Str(rec.SecretUID))
	}
	if rec.GitHubID != 0 {
		one(attrGitHubID, "id", table.Num(rec.GitHubID))
	}
	expr := ""
	if len(set) > 0 {
		expr = "SET " + strings.Join(set, ", ")
	}
	if rec.PodUID != "" {
		names["#pods"], values[":pod"] = attrPods, &types.AttributeValueMemberSS{Value: []string{rec.PodUID}}
		expr += " ADD #pods :pod"
	}
	if expr == "" {
		return nil
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{Key: table.Key(table.RosterPK(pool), name),
		UpdateExpression: aws.String(expr), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values})
	switch {
	case table.ConditionFailed(err):
		return fmt.Errorf("recording %+v for runner %s of pool %s: %w", rec, name, pool, ErrNotRecorded)
	case err != nil:
		return fmt.Errorf("recording %+v for runner %s of pool %s: %w", rec, name, pool, err)
	}
	return nil
}

// Live returns the live runners of pool (a strongly consistent read: a runner
// is added before any object of it exists, so the sweep that sees an object
// sees its runner).
func (s *Store) Live(ctx context.Context, pool string) ([]Runner, error) {
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": table.PartitionKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": table.Str(table.RosterPK(pool))},
		ConsistentRead:            aws.Bool(true),
	})
	var out []Runner
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the roster of pool %s: %w", pool, err)
		}
		for _, it := range page.Items {
			// An item retired in place (as the roster did before it kept
			// retired runners apart) is not live.
			if rn := runner(pool, it); rn.Retired.IsZero() {
				out = append(out, rn)
			}
		}
	}
	return out, nil
}

// Lookup returns the runner name of pool, live or retired (strongly
// consistent: a runner is added before it can register, so a delivery naming
// it finds it). found is false for a runner this deployment never created, or
// whose retirement is older than Linger.
func (s *Store) Lookup(ctx context.Context, pool, name string) (Runner, bool, error) {
	for _, pk := range []string{table.RosterPK(pool), table.RetiredRosterPK(pool)} {
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{Key: table.Key(pk, name), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return Runner{}, false, fmt.Errorf("reading runner %s on the roster of pool %s: %w", name, pool, err)
		}
		if out.Item != nil {
			return runner(pool, out.Item), true, nil
		}
	}
	return Runner{}, false, nil
}

// Has reports whether runner is on pool's roster, live or retired (Lookup).
func (s *Store) Has(ctx context.Context, pool, name string) (bool, error) {
	_, found, err := s.Lookup(ctx, pool, name)
	return found, err
}

// Retire moves the live runner name of pool to the retired partition, where
// it stays for Linger: the copy is written before the live item is deleted,
// so that a retirement cut short leaves the runner live, and the next
// retirement finishes it. A runner that is not live stays off the roster.
func (s *Store) Retire(ctx context.Context, pool, name string, now time.Time) error {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{Key: table.Key(table.RosterPK(pool), name), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("retiring runner %s from the roster of pool %s: %w", name, pool, err)
	}
	if out.Item == nil {
		return nil
	}
	rn := runner(pool, out.Item)
	rn.Retired = now
	retired := item(table.RetiredRosterPK(pool), rn)
	retired[table.TTLAttribute] = table.Num(now.Add(Linger).Unix())
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{Item: retired}); err != nil {
		return fmt.Errorf("retiring runner %s from the roster of pool %s: %w", name, pool, err)
	}
	if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{Key: table.Key(table.RosterPK(pool), name)}); err != nil {
		return fmt.Errorf("retiring runner %s from the roster of pool %s: %w", name, pool, err)
	}
	return nil
}

func item(pk string, rn Runner) map[string]types.AttributeValue {
	it := table.Key(pk, rn.Name)
	it[attrNamespace] = table.Str(rn.Namespace)
	it[attrScope] = table.Str(rn.Scope)
	it[attrCreated] = table.Millis(rn.Created)
	for attr, v := range map[string]string{attrSTS: rn.StatefulSetUID, attrSecret: rn.SecretUID} {
		if v != "" {
			it[attr] = table.Str(v)
		}
	}
	if len(rn.PodUIDs) > 0 {
		it[attrPods] = &types.AttributeValueMemberSS{Value: rn.PodUIDs}
	}
	if rn.GitHubID != 0 {
		it[attrGitHubID] = table.Num(rn.GitHubID)
	}
	if !rn.Retired.IsZero() {
		it[attrRetired] = table.Millis(rn.Retired)
	}
	return it
}

func runner(pool string, it map[string]types.AttributeValue) Runner {
	str := func(attr string) string {
		if v, ok := it[attr].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	rn := Runner{Pool: pool, Name: str(table.SortKey), Namespace: str(attrNamespace), Scope: str(attrScope),
		StatefulSetUID: str(attrSTS), SecretUID: str(attrSecret), GitHubID: table.Int(it, attrGitHubID),
		Created: millis(table.Int(it, attrCreated)), Retired: millis(table.Int(it, attrRetired))}
	if v, ok := it[attrPods].(*types.AttributeValueMemberSS); ok {
		rn.PodUIDs = slices.Sorted(slices.Values(v.Value))
	}
	return rn
}

func millis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
