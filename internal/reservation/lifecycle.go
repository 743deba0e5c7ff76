package reservation

import (
	"slices"
	"time"
)

// A job's life, as one pure function: transition takes the job's item as
// read (or none) and one delivery, and returns the item as it must be after
// the delivery and what the delivery did (Outcome). It does no I/O; the store
// writes the result with one conditional write whose condition is the item as
// read (write.go), and reads and decides again when another write came first.
// Every rule of the package comment and of approval.go is stated here once:
//
//   - forward only: `in_progress` and `completed` apply to a job in an earlier
//     state (or none) and restart its expiration; a later state is final;
//   - `queued` creates the job queued, or is one more distinct `queued` of a
//     queued job: the approval's, which releases a held job (Held);
//   - `waiting` holds a queued job (or creates it held), and brings a spilled
//     job's count home;
//   - a `queued` of a job created more than the retention ago creates nothing
//     (TooOld), but may still release a held job.

// lifecycle is what transition needs besides the item and the delivery.
type lifecycle struct {
	now       time.Time
	retention time.Duration
}

// transition applies d to the job's item r (exists: there is one) and
// returns the item after it; when the outcome is Stale or TooOld the item is
// unchanged and nothing is to be written.
func (l lifecycle) transition(r Reservation, exists bool, d Delivery) (Reservation, Outcome) {
	switch {
	case d.State == Waiting:
		return l.hold(r, exists, d)
	case d.State == Queued && exists:
		return l.requeue(r, d)
	case d.State == Queued && l.tooOld(d):
		return r, TooOld
	case exists && r.State >= d.State:
		return r, Stale
	}
	return l.forward(r, exists, d)
}

// tooOld: a `queued` of a job created more than the retention ago, whose
// item may be gone.
func (l lifecycle) tooOld(d Delivery) bool {
	return d.State == Queued && !d.Created.IsZero() && l.now.Sub(d.Created) > l.retention
}

// forward moves the job to d's state (creating its item): a new expiration,
// the delivery in its trail, the runner it names.
func (l lifecycle) forward(r Reservation, exists bool, d Delivery) (Reservation, Outcome) {
	r = l.described(r, exists, d)
	r.State = d.State
	r.ExpirationMillis = l.now.Add(d.Duration).UnixMilli()
	ttlBase := l.now.Add(d.Duration)
	seen := &Seen{DeliveryID: d.DeliveryID, AtMillis: l.now.UnixMilli()}
	switch d.State {
	case Queued:
		r.SeenQueued = seen
	case InProgress:
		r.SeenInProgress = seen
	default:
		r.SeenCompleted = seen
		ttlBase = l.now
	}
	if d.RunnerID != 0 {
		r.RunnerID = d.RunnerID
	}
	if d.RunnerName != "" {
		r.RunnerName = d.RunnerName
	}
	out := Applied
	if d.State == Queued && d.AwaitsApproval {
		r.SeenWaiting, ttlBase, out = seen, l.now.Add(MaxApprovalWait), Held
	}
	r.TTL = ttlBase.Add(l.retention).Unix()
	return r, out
}

// described is r with what every recorded delivery writes: the job's pool,
// ids, repository, amount, latest delivery, labels and scope; its effective
// time is set once, when the item is created.
func (l lifecycle) described(r Reservation, exists bool, d Delivery) Reservation {
	r.Pool, r.JobID, r.RunID, r.Repository, r.Amount, r.DeliveryID = d.Pool, d.JobID, d.RunID, d.Repository, d.Amount, d.DeliveryID
	if !exists || r.EffectiveMillis == 0 {
		r.EffectiveMillis = l.now.UnixMilli()
	}
	if len(d.Labels) > 0 {
		r.Labels, r.Organization, r.Enterprise = slices.Clone(d.Labels), d.Organization, d.Enterprise
	}
	return r
}

// hold records a `waiting`: it creates the job held, or holds the queued job
// it finds and brings its count home (its approval may come after a spill's
// pointer is gone). A job already held, in progress or completed is Stale.
// Both `queued` may have come first: then the job is approved, and the
// `waiting` only recorded (Applied).
func (l lifecycle) hold(r Reservation, exists bool, d Delivery) (Reservation, Outcome) {
	if exists && (r.State != Queued || r.SeenWaiting != nil) {
		return r, Stale
	}
	r = l.described(r, exists, d)
	r.State = Queued
	if !exists || r.ExpirationMillis == 0 {
		r.ExpirationMillis = l.now.UnixMilli()
	}
	r.SeenWaiting = &Seen{DeliveryID: d.DeliveryID, AtMillis: l.now.UnixMilli()}
	r.CountedIn, r.MovedBy = "", ""
	r.TTL = l.now.Add(MaxApprovalWait).Add(l.retention).Unix()
	if !r.Held() {
		return r, Applied
	}
	return r, Held
}

// requeue applies a `queued` to the job's item: a delivery already counted,
// or a job past queued, is Stale; a new distinct `queued` is counted, and
// releases a held job when it is the approval's: the job then counts again
// as one queued now (new effective and expiration times).
func (l lifecycle) requeue(r Reservation, d Delivery) (Reservation, Outcome) {
	id, ids := queuedID(d), r.queuedIDs()
	switch {
	case r.State != Queued || slices.Contains(ids, id):
		return r, Stale
	case l.tooOld(d) && r.SeenWaiting == nil:
		return r, TooOld
	}
	seen := &Seen{DeliveryID: d.DeliveryID, AtMillis: l.now.UnixMilli()}
	released := r.Held() && len(ids)+1 >= releasedAt
	if r.SeenQueued == nil {
		r.SeenQueued = seen
	}
	r.DeliveryID = d.DeliveryID
	if d.AwaitsApproval && r.SeenWaiting == nil {
		// Another `queued` came first: with this one the job has two, and
		// is not held; the hold is only recorded.
		r.SeenWaiting = seen
	}
	r.QueuedDeliveries = append(ids, id)
	slices.Sort(r.QueuedDeliveries)
	if !released {
		return r, Applied
	}
	r.EffectiveMillis = l.now.UnixMilli()
	r.ExpirationMillis = l.now.Add(d.Duration).UnixMilli()
	r.TTL = l.now.Add(d.Duration).Add(l.retention).Unix()
	r.SeenApproved = seen
	return r, Released
}

// GitHub's word on a held job, as the sweeper asks it (Checked): the job's
// status by GET /repos/{owner}/{repo}/actions/jobs/{job_id}, or Gone when
// GitHub has no such job.
const (
	GitHubWaiting    = "waiting"
	GitHubQueued     = "queued"
	GitHubInProgress = "in_progress"
	GitHubCompleted  = "completed"
	GitHubGone       = "gone"
)

// checkedID is the delivery id the trail shows for what GitHub's answer to a
// check applied: no delivery carried it.
const checkedID = "github-check"

// checked applies GitHub's answer about a held job: still waiting, it stays
// held and the check's time is kept (HeldCheckedMillis); queued, it was
// approved and its deliveries left that ambiguous or lost, and it is released
// as the approval's `queued` does; in progress, completed or gone, it moves
// forward as the delivery of that state would (gone: completed). A job not
// held any more when the answer comes is Stale.
func (l lifecycle) checked(r Reservation, status string, d Delivery) (Reservation, Outcome) {
	if !r.Held() {
		return r, Stale
	}
	seen := &Seen{DeliveryID: checkedID, AtMillis: l.now.UnixMilli()}
	switch status {
	case GitHubWaiting:
		r.HeldCheckedMillis = l.now.UnixMilli()
		return r, Held
	case GitHubQueued:
		r.SeenApproved = seen
		r.EffectiveMillis = l.now.UnixMilli()
		r.ExpirationMillis = l.now.Add(d.Duration).UnixMilli()
		r.TTL = l.now.Add(d.Duration).Add(l.retention).Unix()
		return r, Released
	case GitHubInProgress:
		d.State = InProgress
	default:
		d.State = Completed
	}
	d.DeliveryID = checkedID
	return l.forward(r, true, d)
}
