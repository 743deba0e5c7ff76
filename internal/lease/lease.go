// Package lease keeps, in the product's table, who may act on a pool now: the
// pool's lease item (PK=SWEEP#<pool>, SK=LEASE). Nobody acquires it before it
// expires or is released, and its holder stops by its Deadline (expiry minus a
// margin) unless it renewed — Lease.Hold renews it and stops the holder's work
// in time: so two sweepers do not act on one pool at once, provided their clocks
// agree within the margin and a write in flight when the holder stops lands
// within it (TestHoldStopsAtTheDeadlineWhileRenewalsHang).
package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// ErrHeld means another sweeper holds the pool's lease.
var ErrHeld = errors.New("lease held by another sweeper")

// ErrLost means the lease expired and someone else took it: stop acting on the pool.
var ErrLost = errors.New("lease lost")

// Leases hands out per-pool leases. A lease is a conditional write on the pool's
// LEASE item: it may be taken when absent, released, or expired — never re-taken
// by a holder that already has it, so holders must be unique per invocation.
//
// The item's expiry is what other sweepers go by; the holder goes by its own
// Deadline, the expiry minus a margin, and must stop acting on the pool by then
// unless a renewal succeeded. Both are measured from when the acquiring or
// renewing request was sent, so a slow answer only shortens the holder's time.
// The margin covers the clock skew between invocations and a write still in
// flight when the holder stops.
//
// Nudges that find the lease taken are not lost: MarkDirty increments a counter on
// the held lease, and Release refuses to let go while the counter differs from what
// the holder saw at its last (re)start, so the holder sweeps again. The jobs a
// nudge names go with it (Lease.Nudged), so that the holder reads them even where
// its index read lags; they stay on the item until a release with nothing pending.
type Leases struct {
	db          table.Table
	clock       clock.Clock
	length      time.Duration
	margin      time.Duration
	callTimeout time.Duration
}

// Option tunes Leases.
type Option func(*Leases)

// WithMargin sets how long before the lease's expiry its holder's Deadline falls
// (default a sixth of the length).
func WithMargin(d time.Duration) Option { return func(l *Leases) { l.margin = d } }

// WithCallTimeout bounds each DynamoDB call of a lease operation (default a quarter
// of the length, so that a renewal sent a third into the lease can time out and be
// retried before the Deadline): the SDK has no response timeout of its own.
func WithCallTimeout(d time.Duration) Option { return func(l *Leases) { l.callTimeout = d } }

// New returns leases of the given length (keep it well under the Lambda timeout).
// The clock dates acquisitions and renewals and times Hold. It fails, naming the
// setting, unless the length is positive, the margin at least zero and shorter
// than the length, and the call timeout positive.
func New(db table.API, tableName string, clk clock.Clock, length time.Duration, opts ...Option) (*Leases, error) {
	l := &Leases{db: table.Table{DB: db, Name: tableName}, clock: clk, length: length, margin: length / 6, callTimeout: length / 4}
	for _, o := range opts {
		o(l)
	}
	if err := l.validate(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Leases) validate() error {
	switch {
	case l.length <= 0:
		return fmt.Errorf("lease length %s: must be positive", l.length)
	case l.margin < 0 || l.margin >= l.length:
		return fmt.Errorf("lease margin %s: must be at least 0 and less than the lease length %s", l.margin, l.length)
	case l.callTimeout <= 0:
		return fmt.Errorf("lease call timeout %s: must be positive", l.callTimeout)
	}
	return nil
}

// call bounds one DynamoDB call by the call timeout.
func (l *Leases) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.callTimeout)
}

// Lease is a held lease. Its methods must not be called concurrently.
type Lease struct {
	leases *Leases
	Pool   string
	Holder string
	// Until is the lease's expiry as written by the last successful acquisition or
	// renewal: the time that request was sent plus the length.
	Until time.Time
	// Nudged are the jobs named by nudges that found the lease held, since the last
	// release with nothing pending (as of the acquisition or the last Release that
	// returned again).
	Nudged []int64
	// Finished are the runners named by refill nudges (their job completed)
	// that found the lease held, over the same span as Nudged.
	Finished []string
	// dirty is the dirty counter the holder has accounted for.
	dirty int64
}

// HeldError says who holds a lease and until when.
type HeldError struct {
	Pool, Holder string
	Until        time.Time
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("pool %s: lease held by %s until %s", e.Pool, e.Holder, e.Until.Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Acquire takes the pool's lease for holder. It fails with a *HeldError (matching
// ErrHeld) when anyone — holder included — holds an unexpired lease: a holder
// name reused by two invocations must not give both the lease.
func (l *Leases) Acquire(ctx context.Context, pool, holder string) (*Lease, error) {
	now := l.clock.Now() // the lease runs from the request's sending, not its answer
	until := now.Add(l.length)
	cctx, cancel := l.call(ctx)
	defer cancel()
	out, err := l.db.UpdateItem(cctx, &dynamodb.UpdateItemInput{
		Key:                 itemKey(pool),
		UpdateExpression:    aws.String("SET #holder = :me, #until = :until, #acquired = :now"),
		ConditionExpression: aws.String("attribute_not_exists(#holder) OR #holder = :none OR #until <= :now"),
		ExpressionAttributeNames: map[string]string{
			"#holder": "holder", "#until": "until", "#acquired": "acquiredAt",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":me": table.Str(holder), ":none": table.Str(""), ":until": table.Millis(until), ":now": table.Millis(now),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if table.ConditionFailed(err) {
		return nil, l.heldError(ctx, pool)
	}
	if err != nil {
		return nil, fmt.Errorf("acquiring lease of pool %s: %w", pool, err)
	}
	return &Lease{leases: l, Pool: pool, Holder: holder, Until: until, dirty: table.Int(out.Attributes, "dirty"),
		Nudged: table.IntSet(out.Attributes, nudgedAttr), Finished: stringSet(out.Attributes, finishedAttr)}, nil
}

// heldError reads who holds the lease (dynalite ignores ReturnValuesOnConditionCheckFailure).
func (l *Leases) heldError(ctx context.Context, pool string) error {
	ctx, cancel := l.call(ctx)
	defer cancel()
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{Key: itemKey(pool), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("pool %s: %w (reading holder: %v)", pool, ErrHeld, err)
	}
	e := &HeldError{Pool: pool}
	if v, ok := out.Item["holder"].(*types.AttributeValueMemberS); ok {
		e.Holder = v.Value
	}
	e.Until = time.UnixMilli(table.Int(out.Item, "until")).UTC()
	return e
}

// Length is how long the lease lasts from an acquisition or renewal.
func (le *Lease) Length() time.Duration { return le.leases.length }

// Deadline is when the holder must have stopped acting on the pool unless a
// renewal succeeded before: Until minus the margin.
func (le *Lease) Deadline() time.Time { return le.Until.Add(-le.leases.margin) }

// MarkDirty records that pool needs another sweep, for jobs (if any). It succeeds
// only while someone holds an unexpired lease (who will then sweep again before
// releasing, and finds jobs in Lease.Nudged); it returns false when the lease is
// free, and the caller should try to Acquire instead.
func (l *Leases) MarkDirty(ctx context.Context, pool string, jobs ...int64) (bool, error) {
	return l.MarkDirtyFor(ctx, pool, jobs, nil)
}

// MarkDirtyFor is MarkDirty for jobs and for the finished runners a refill
// nudge named, which the holder finds in Lease.Finished.
func (l *Leases) MarkDirtyFor(ctx context.Context, pool string, jobs []int64, finished []string) (bool, error) {
	ctx, cancel := l.call(ctx)
	defer cancel()
	update := "ADD #dirty :one"
	names := map[string]string{"#dirty": "dirty", "#holder": "holder", "#until": "until"}
	values := map[string]types.AttributeValue{":one": table.Num(1), ":none": table.Str(""), ":now": table.Millis(l.clock.Now())}
	if len(jobs) > 0 {
		ids := make([]string, len(jobs))
		for i, j := range jobs {
			ids[i] = strconv.FormatInt(j, 10)
		}
		update += ", #nudged :jobs"
		names["#nudged"], values[":jobs"] = nudgedAttr, &types.AttributeValueMemberNS{Value: distinct(ids)}
	}
	if len(finished) > 0 {
		update += ", #finished :runners"
		names["#finished"], values[":runners"] = finishedAttr, &types.AttributeValueMemberSS{Value: distinct(finished)}
	}
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		Key:                       itemKey(pool),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("#holder <> :none AND #until > :now"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	switch {
	case table.ConditionFailed(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("marking pool %s dirty: %w", pool, err)
	}
	return true, nil
}

// Renew extends the lease by its length from now (the request's sending); Until
// and Deadline move only when it succeeds. The call is bounded by the call timeout.
// ErrLost means it expired and was taken: the caller must stop writing on the
// pool's behalf. Another error leaves the lease as it was: the caller may retry
// until its Deadline.
func (le *Lease) Renew(ctx context.Context) error {
	l := le.leases
	until := l.clock.Now().Add(l.length)
	ctx, cancel := l.call(ctx)
	defer cancel()
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		Key:                       itemKey(le.Pool),
		UpdateExpression:          aws.String("SET #until = :until"),
		ConditionExpression:       aws.String("#holder = :me"),
		ExpressionAttributeNames:  map[string]string{"#until": "until", "#holder": "holder"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":until": table.Millis(until), ":me": table.Str(le.Holder)},
	})
	switch {
	case table.ConditionFailed(err):
		return fmt.Errorf("renewing lease of pool %s: %w", le.Pool, ErrLost)
	case err != nil:
		return fmt.Errorf("renewing lease of pool %s: %w", le.Pool, err)
	}
	le.Until = until
	return nil
}

// Release gives the lease up, unless nudges marked the pool dirty since the holder
// last accounted for them: then it keeps the lease, accounts for them, and returns
// again=true — the caller sweeps once more and calls Release again.
func (le *Lease) Release(ctx context.Context) (again bool, err error) {
	refused, err := le.clear(ctx, true)
	switch {
	case err != nil:
		return false, err
	case refused:
		return le.reconcileDirty(ctx)
	}
	return false, nil
}

// ForceRelease gives the lease up even if nudges marked the pool dirty; the next
// nudge or scheduled sweep takes it.
func (le *Lease) ForceRelease(ctx context.Context) error {
	refused, err := le.clear(ctx, false)
	if refused {
		return fmt.Errorf("releasing lease of pool %s: %w", le.Pool, ErrLost)
	}
	return err
}

// clear empties the holder if it is still le's (and, with onlyIfClean, if no
// nudge came since le last looked, and then also the nudged jobs, all swept);
// refused reports that the condition failed.
func (le *Lease) clear(ctx context.Context, onlyIfClean bool) (refused bool, err error) {
	l := le.leases
	cond := "#holder = :me"
	update := "SET #holder = :none, #until = :zero"
	names := map[string]string{"#holder": "holder", "#until": "until"}
	values := map[string]types.AttributeValue{":none": table.Str(""), ":zero": table.Num(0), ":me": table.Str(le.Holder)}
	if onlyIfClean {
		cond += " AND (attribute_not_exists(#dirty) OR #dirty = :seen)"
		update += " REMOVE #nudged, #finished"
		names["#dirty"], values[":seen"], names["#nudged"], names["#finished"] = "dirty", table.Num(le.dirty), nudgedAttr, finishedAttr
	}
	cctx, cancel := l.call(ctx)
	defer cancel()
	_, err = l.db.UpdateItem(cctx, &dynamodb.UpdateItemInput{
		Key:                       itemKey(le.Pool),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	switch {
	case table.ConditionFailed(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("releasing lease of pool %s: %w", le.Pool, err)
	}
	return false, nil
}

// reconcileDirty runs after a refused release: either nudges arrived (sweep again)
// or the lease is no longer ours.
func (le *Lease) reconcileDirty(ctx context.Context) (bool, error) {
	l := le.leases
	gctx, cancel := l.call(ctx)
	defer cancel()
	out, err := l.db.GetItem(gctx, &dynamodb.GetItemInput{Key: itemKey(le.Pool), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, fmt.Errorf("reading lease of pool %s: %w", le.Pool, err)
	}
	if h, _ := out.Item["holder"].(*types.AttributeValueMemberS); h == nil || h.Value != le.Holder {
		return false, fmt.Errorf("releasing lease of pool %s: %w", le.Pool, ErrLost)
	}
	le.dirty, le.Nudged, le.Finished = table.Int(out.Item, "dirty"), table.IntSet(out.Item, nudgedAttr), stringSet(out.Item, finishedAttr)
	return true, le.Renew(ctx)
}

// nudgedAttr is the lease item's number set of nudged jobs; finishedAttr its
// string set of the runners refill nudges named.
const (
	nudgedAttr   = "nudgedJobs"
	finishedAttr = "finishedRunners"
)

// distinct is vs sorted, each once: DynamoDB refuses a set given a value twice.
func distinct(vs []string) []string {
	out := slices.Clone(vs)
	slices.Sort(out)
	return slices.Compact(out)
}

// stringSet is item's string set attr (nil when absent).
func stringSet(item map[string]types.AttributeValue, attr string) []string {
	if v, ok := item[attr].(*types.AttributeValueMemberSS); ok {
		return v.Value
	}
	return nil
}

// itemKey is the key of pool's lease item.
func itemKey(pool string) map[string]types.AttributeValue {
	return table.Key(table.SweepPK(pool), table.LeaseSK)
}
