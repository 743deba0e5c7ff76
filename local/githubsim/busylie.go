package githubsim

import (
	"errors"
	"fmt"
	"time"
)

// BusyLie makes the REST API's busy flag lag behind and flicker the way GitHub's
// does (reported publicly; docs/concepts.md cites it): a runner that holds a job reads busy: false for the
// first seconds after the job was assigned, and again at short moments mid-job.
// DELETE .../actions/runners/{id} decides by the same flag, so it removes such a
// runner with 204, and its job then fails as on GitHub (see Job.LostRunner).
//
// Only the REST view lies: the Actions service's side (AcquireJob, RunningJob,
// Runner, Runners, the runner agents under /_runner/) keeps the truth. The
// answers follow Options.Clock and are a function of the seed, the assignment
// (its job, or the runner for SetBusy) and the time since the runner became
// busy, so the same run under a fake clock gets the same answers.
type BusyLie struct {
	// MinLag and MaxLag bound the lag: how long after a runner becomes busy REST
	// still says busy: false. Each assignment draws its own lag in [MinLag, MaxLag].
	MinLag, MaxLag time.Duration
	// FlickerEvery and FlickerFor make the mid-job moments: after the lag, REST
	// says busy: false for FlickerFor once in every FlickerEvery (counted from the
	// assignment), at an offset drawn per period. Zero FlickerEvery: no flicker.
	FlickerEvery, FlickerFor time.Duration
	// Seed makes the draws reproducible.
	Seed uint64
}

// Validate reports a lie that cannot be applied, naming the field.
func (l *BusyLie) Validate() error {
	switch {
	case l.MinLag < 0 || l.MaxLag < l.MinLag:
		return fmt.Errorf("BusyLie: MinLag %s and MaxLag %s: want 0 ≤ MinLag ≤ MaxLag", l.MinLag, l.MaxLag)
	case l.FlickerEvery < 0 || l.FlickerFor < 0:
		return errors.New("BusyLie: FlickerEvery and FlickerFor must not be negative")
	case l.FlickerEvery > 0 && (l.FlickerFor == 0 || l.FlickerFor >= l.FlickerEvery):
		return fmt.Errorf("BusyLie: FlickerFor %s: want 0 < FlickerFor < FlickerEvery (%s)", l.FlickerFor, l.FlickerEvery)
	}
	return nil
}

// Lag is the lag of the assignment key (a job id, see saysIdle).
func (l *BusyLie) lag(key uint64) time.Duration {
	return l.MinLag + time.Duration(draw(l.Seed, key, 0)%uint64(l.MaxLag-l.MinLag+1))
}

// saysIdle reports whether REST says busy: false for a runner busy for since
// with assignment key.
func (l *BusyLie) saysIdle(key uint64, since time.Duration) bool {
	if since < l.lag(key) {
		return true
	}
	if l.FlickerEvery <= 0 {
		return false
	}
	period := since / l.FlickerEvery
	offset := time.Duration(draw(l.Seed, key, 1+uint64(period)) % uint64(l.FlickerEvery-l.FlickerFor+1))
	at := since - period*l.FlickerEvery
	return at >= offset && at < offset+l.FlickerFor
}

// draw is a deterministic pseudo-random number of (seed, key, n): splitmix64's
// finalizer over their mix.
func draw(seed, key, n uint64) uint64 {
	z := seed ^ key*0x9e3779b97f4a7c15 ^ n*0xbf58476d1ce4e5b9
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// assignment is when a runner became busy, and the key of its draws: the job's
// id, or the runner's id with the top bit set for a runner made busy by SetBusy.
type assignment struct {
	at  time.Time
	key uint64
}

// SetBusyLie turns the lie on (nil: off, REST tells the truth) from now on, for
// runners busy already too.
func (s *Server) SetBusyLie(l *BusyLie) error {
	if l != nil {
		if err := l.Validate(); err != nil {
			return err
		}
		c := *l
		l = &c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lie = l
	return nil
}

// SetRESTBusy makes the REST API say busy for runner id (both the busy field of
// the runner list and DELETE's busy check), whatever the truth and the lie,
// until ClearRESTBusy or the runner's removal. SetRESTBusy(id, false) on a
// runner running a job is "REST says idle although a job is running": a DELETE
// then answers 204 and the job is lost. ErrRunnerGone if there is no such runner.
func (s *Server) SetRESTBusy(id int64, busy bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.runners[id]; !ok {
		return ErrRunnerGone
	}
	s.restBusy[id] = busy
	return nil
}

// ClearRESTBusy ends SetRESTBusy for runner id: REST derives busy from the
// truth (through the lie, when on) again.
func (s *Server) ClearRESTBusy(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.restBusy, id)
}

// RESTBusy is the busy flag the REST API shows for runner id right now; false
// when there is no such runner.
func (s *Server) RESTBusy(id int64) (busy, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, ok := s.runners[id]
	if !ok {
		return false, false
	}
	return s.restBusyLocked(rn), true
}

// restBusyLocked is the REST view of rn's busy flag: the override of
// SetRESTBusy, else the truth through the lie.
func (s *Server) restBusyLocked(rn *Runner) bool {
	if v, ok := s.restBusy[rn.ID]; ok {
		return v
	}
	if !rn.Busy || s.lie == nil {
		return rn.Busy
	}
	a := s.assigned[rn.ID]
	return !s.lie.saysIdle(a.key, s.opts.Clock.Since(a.at))
}

// assignLocked records that rn became busy now, with key for the lie's draws.
func (s *Server) assignLocked(rn *Runner, key uint64) {
	s.assigned[rn.ID] = assignment{at: s.opts.Clock.Now(), key: key}
}

// forgetRunnerLocked drops the REST view's state of a removed runner.
func (s *Server) forgetRunnerLocked(id int64) {
	delete(s.assigned, id)
	delete(s.restBusy, id)
}

// LostRunnerReason is the failure GitHub gives a job whose runner's registration
// disappeared while it ran, with the runner's name.
const LostRunnerReason = "The self-hosted runner: %s lost communication with the server. Verify the machine is running " +
	"and has a healthy network connection. Anything in your workflow that terminates the runner process, starves it " +
	"for CPU/Memory, or blocks its network access can cause this error."

// loseJobLocked fails the job rn is running because rn was removed under it
// (DELETE in the lie window), as GitHub fails it. It returns the job, to emit
// once the lock is released, and false when rn ran none.
func (s *Server) loseJobLocked(rn *Runner) (Job, bool) {
	for _, j := range s.jobs {
		if j.State != JobInProgress || j.RunnerID != rn.ID {
			continue
		}
		j.State, j.Conclusion, j.EndedAt = JobCompleted, JobFailure, s.opts.Clock.Now()
		j.LostRunner, j.FailureReason = true, fmt.Sprintf(LostRunnerReason, rn.Name)
		s.lost = append(s.lost, j.ID)
		return *j, true
	}
	return Job{}, false
}

// BusyLiesTold counts the times the REST API said a runner was idle while it
// ran a job: in a runner list (once per runner listed) or by a DELETE's 204.
func (s *Server) BusyLiesTold() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.liesTold
}

// LostJobs returns the jobs that failed because a REST DELETE removed their
// runner while they ran (Job.LostRunner), in the order they were lost.
func (s *Server) LostJobs() []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Job, 0, len(s.lost))
	for _, id := range s.lost {
		out = append(out, *s.jobs[id])
	}
	return out
}
