package reservation

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// Approval gates. A job that deploys to an environment with required reviewers
// gets `queued`, then `waiting` (held for the approval, which can take days),
// then, once approved, `queued` again, then `in_progress` and `completed`.
// Webhooks are not ordered, and no field of the payload orders the two
// `queued`: their times are the job's, not the delivery's. What tells them
// apart is the delivery id (X-GitHub-Delivery), which a redelivery keeps. So
// the item keeps the ids of the job's distinct `queued` deliveries, and the rule
// is:
//
//	held = state queued AND a `waiting` was recorded AND fewer than 2 distinct `queued` were recorded
//
// A `queued` whose workflow_job.status already says "waiting" (GitHub renders
// the first one so when the job is held at its creation) records the hold
// itself (Delivery.AwaitsApproval), so the job does not hold a runner for the
// moment until its `waiting` arrives. A held job holds no runner: Active
// leaves it out, whatever its expiration time. Every input of the rule only
// grows (a set of ids, a recorded `waiting`, the forward-only state), so each
// order of the five deliveries, and any redelivery among them, ends in the
// same state as the order GitHub sent them in, and no redelivery counts a job
// twice: `queued` + `queued` before the `waiting` is an approved job that the
// late `waiting` does not hold; `waiting` first creates the item held, and
// counts nothing until two `queued` are recorded; `in_progress` or `completed`
// end the hold whatever is missing.
//
// The `queued` that releases a job restarts its reservation as a job queued
// then: effective and expiration times from the release. While held, the item's
// TTL is set beyond GitHub's longest wait for an approval (MaxApprovalWait) plus
// the retention, so a release days later finds the item; and a release of a job
// created more than the retention ago is applied, not refused as TooOld.

// MaxApprovalWait is how long GitHub lets a job wait for its environment's
// approval (30 days) before it fails it; a held item lives that long and the
// retention more.
const MaxApprovalWait = 30 * 24 * time.Hour

// releasedAt is the number of distinct `queued` deliveries that, after a
// `waiting`, release the job: the first one and the approval's.
const releasedAt = 2

// heldCondition is Held as a DynamoDB condition; it names #state, #wait, #qids,
// :queued and :releasedAt. An item without queuedDeliveries has at most one
// distinct `queued` (SeenQueued): requeue writes the set, the first id
// included, with the second.
const heldCondition = "#state = :queued AND attribute_exists(#wait) AND " +
	"(attribute_not_exists(#qids) OR size(#qids) < :releasedAt)"

// Held reports whether the job waits for its environment's approval and so
// holds no runner: see the rule above.
func (r Reservation) Held() bool {
	return r.State == Queued && r.SeenWaiting != nil && len(r.queuedIDs()) < releasedAt
}

// queuedIDs are the ids of the job's distinct `queued` deliveries: the set
// written once a second one arrived, and the first one's (SeenQueued).
func (r Reservation) queuedIDs() []string {
	ids := slices.Clone(r.QueuedDeliveries)
	if r.SeenQueued != nil {
		if first := queuedID(Delivery{DeliveryID: r.SeenQueued.DeliveryID}); !slices.Contains(ids, first) {
			ids = append(ids, first)
		}
	}
	return ids
}

// queuedID is the id d counts under among its job's `queued` deliveries.
// DynamoDB sets hold no empty string: a delivery without an id counts as "-".
func queuedID(d Delivery) string {
	if d.DeliveryID == "" {
		return "-"
	}
	return d.DeliveryID
}

// hold records a `waiting`: it creates the job's item held, or holds the
// queued job it finds, in one conditional write; a job already held, or in
// progress or completed, is Stale. The same write brings the count of a
// spilled job home (move.go): the pointer in the pool it was spilled to lives
// as long as the job's reservation did when it moved, not as long as an
// approval may take.
func (s *Store) hold(ctx context.Context, d Delivery) (Outcome, error) {
	now := s.clock.Now()
	names := map[string]string{
		"#state": "state", "#amount": "amount", "#exp": "expirationTime", "#ttl": table.TTLAttribute,
		"#eff": "effectiveTime", "#pool": "pool", "#job": "jobId", "#run": "runId", "#repo": "repository",
		"#delivery": "deliveryId", "#active": table.ActiveKey, "#wait": "seenWaiting",
		"#counted": "countedIn", "#why": "movedBy",
	}
	values := map[string]types.AttributeValue{
		":queued":   table.Num(int64(Queued)),
		":amount":   table.Num(int64(d.Amount)),
		":now":      table.Millis(now),
		":ttl":      table.Num(now.Add(MaxApprovalWait).Add(s.retention).Unix()),
		":pool":     table.Str(d.Pool),
		":job":      table.Num(d.JobID),
		":run":      table.Num(d.RunID),
		":repo":     table.Str(d.Repository),
		":delivery": table.Str(d.DeliveryID),
		":active":   table.Str(table.PoolPK(d.Pool)),
		":seen":     seenValue(d.DeliveryID, now),
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table),
		Key:       table.Key(table.PoolPK(d.Pool), table.JobSK(d.JobID)),
		UpdateExpression: aws.String("SET #state = :queued, #amount = :amount, #ttl = :ttl, #pool = :pool, #job = :job, " +
			"#run = :run, #repo = :repo, #delivery = :delivery, #active = :active, #wait = :seen, " +
			"#eff = if_not_exists(#eff, :now), #exp = if_not_exists(#exp, :now)" + jobUpdate(d, names, values) +
			" REMOVE #counted, #why"),
		ConditionExpression:       aws.String("attribute_not_exists(#state) OR (#state = :queued AND attribute_not_exists(#wait))"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	switch {
	case table.ConditionFailed(err):
		return Stale, nil
	case err != nil:
		return 0, fmt.Errorf("recording waiting of job %d in pool %s: %w", d.JobID, d.Pool, err)
	}
	// Both `queued` may have come first: the job is approved, and the
	// `waiting` only recorded.
	rs, err := decode([]map[string]types.AttributeValue{out.Attributes}, d.Pool)
	if err != nil {
		return 0, err
	}
	if !rs[0].Held() {
		return Applied, nil
	}
	return Held, nil
}

// maxRequeueTries bounds the read-decide-write rounds of requeue; each lost
// round means another delivery of the same job was recorded meanwhile.
const maxRequeueTries = 5

// recordQueued records a `queued`: the usual write creates the job's item; when
// the item exists, requeue decides what the delivery is to it. A `queued` of a
// job created more than the retention ago creates nothing: it can only release
// a held job.
func (s *Store) recordQueued(ctx context.Context, d Delivery) (Outcome, error) {
	tooOld := s.tooOld(d.State, d.Created, s.clock.Now())
	for range maxRequeueTries {
		if !tooOld {
			out, err := s.recordForward(ctx, d)
			switch {
			case err != nil:
				return 0, err
			case out == Applied && d.AwaitsApproval:
				return Held, nil
			case out == Applied:
				return out, nil
			}
		}
		r, ok, err := s.get(ctx, d.Pool, d.JobID)
		switch {
		case err != nil:
			return 0, err
		case !ok && tooOld:
			return TooOld, nil
		case !ok:
			continue // removed by TTL between the two calls: create it
		}
		out, done, err := s.requeue(ctx, d, r, tooOld)
		if err != nil || done {
			return out, err
		}
	}
	return 0, fmt.Errorf("recording queued of job %d in pool %s: other deliveries of the job kept changing it", d.JobID, d.Pool)
}

// requeue applies a `queued` to r, the job's item as read: a delivery already
// counted, or a job past queued, is Stale; a new distinct `queued` is counted,
// and releases a held job when it is the approval's. The write's condition is
// the item as read, so done is false, with nothing written, when another
// delivery changed it meanwhile, and the caller reads it again.
func (s *Store) requeue(ctx context.Context, d Delivery, r Reservation, tooOld bool) (out Outcome, done bool, err error) {
	id := queuedID(d)
	ids := r.queuedIDs()
	switch {
	case r.State != Queued || slices.Contains(ids, id):
		return Stale, true, nil
	case tooOld && r.SeenWaiting == nil:
		return TooOld, true, nil
	}
	now := s.clock.Now()
	released := r.Held() && len(ids)+1 >= releasedAt
	names := map[string]string{"#state": "state", "#qids": "queuedDeliveries", "#wait": "seenWaiting",
		"#seenq": seenAttribute(Queued), "#delivery": "deliveryId"}
	values := map[string]types.AttributeValue{
		":queued": table.Num(int64(Queued)), ":qids": &types.AttributeValueMemberSS{Value: append(ids, id)},
		":seen": seenValue(d.DeliveryID, now), ":delivery": table.Str(d.DeliveryID),
	}
	update := "SET #seenq = if_not_exists(#seenq, :seen), #delivery = :delivery"
	if d.AwaitsApproval && r.SeenWaiting == nil {
		// Another `queued` came first: with this one the job has two, and is
		// not held; the hold is only recorded.
		update += ", #wait = :seen"
	}
	if released {
		expiration := now.Add(d.Duration)
		names["#exp"], names["#eff"], names["#ttl"], names["#approved"] = "expirationTime", "effectiveTime", table.TTLAttribute, "seenApproved"
		values[":exp"], values[":now"] = table.Millis(expiration), table.Millis(now)
		values[":ttl"] = table.Num(expiration.Add(s.retention).Unix())
		update += ", #exp = :exp, #eff = :now, #ttl = :ttl, #approved = :seen"
	}
	update += " ADD #qids :qids"
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       table.Key(table.PoolPK(d.Pool), table.JobSK(d.JobID)),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(asRead(r, values)),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	switch {
	case table.ConditionFailed(err):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("recording queued of job %d in pool %s: %w", d.JobID, d.Pool, err)
	case released:
		return Released, true, nil
	}
	return Applied, true, nil
}

// asRead is the condition that the item is still as r shows it in what requeue
// decides on: queued, its `waiting` recorded or not, the same distinct
// `queued` deliveries (ids only grow, so the same number is the same ids). It
// names #state, #wait, #qids and :queued, and adds the value it uses.
func asRead(r Reservation, values map[string]types.AttributeValue) string {
	cond := "#state = :queued"
	if r.SeenWaiting != nil {
		cond += " AND attribute_exists(#wait)"
	} else {
		cond += " AND attribute_not_exists(#wait)"
	}
	if len(r.QueuedDeliveries) == 0 {
		cond += " AND attribute_not_exists(#qids)"
	} else {
		values[":n"] = table.Num(int64(len(r.QueuedDeliveries)))
		cond += " AND size(#qids) = :n"
	}
	return cond
}

// seenValue is a Seen as the item stores it.
func seenValue(delivery string, at time.Time) types.AttributeValue {
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"id": table.Str(delivery), "at": table.Num(at.UnixMilli()),
	}}
}

// approvalTrail is the part of the trail an approval gate adds: the `waiting`
// and the `queued` that released the job.
func (r Reservation) approvalTrail() []Seen {
	var out []Seen
	if r.SeenWaiting != nil {
		s := *r.SeenWaiting
		s.State = Waiting
		out = append(out, s)
	}
	if r.SeenApproved != nil {
		s := *r.SeenApproved
		s.State = Queued
		out = append(out, s)
	}
	return out
}
