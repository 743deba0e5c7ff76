package reservation

import (
	"slices"
	"time"
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
//	       AND GitHub was not found to have approved it (Checked)
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

// Held reports whether the job waits for its environment's approval and so
// holds no runner: see the rule above.
func (r Reservation) Held() bool {
	return r.State == Queued && r.SeenWaiting != nil && len(r.queuedIDs()) < releasedAt && r.SeenApproved == nil
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
