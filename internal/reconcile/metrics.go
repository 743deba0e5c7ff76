package reconcile

import (
	"time"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/githubapi"
)

// sweepStats counts what one pool sweep did. The stages only add to it; the
// sweep's log line and its metrics (emit) alone read it.
type sweepStats struct {
	created, deleted, marked int
	// vetoed counts, by signal, the stops a busy signal vetoed (busy.go);
	// disagreements, those vetoed against GitHub's idle answer.
	vetoed        map[string]int
	disagreements int
	// forbidden counts RemoveRunner's 403 answers.
	forbidden int
	// windows: for each pod a stop deleted while its runner container may have
	// run, the time from the busy signals' last read to the delete.
	windows []time.Duration
	// registrations: for each runner this sweep first saw GitHub list, how
	// long after its creation.
	registrations []time.Duration
	// reruns: what the re-run stage did (rerun.go).
	reruns rerunCounts
	// workflowPodsRemoved counts the leftover workflow pods deleted (workflow.go).
	workflowPodsRemoved int
}

// emit logs one line per pool sweep and writes its CloudWatch Embedded Metric
// Format record (namespace runnerscaler, dimension Pool) to opts.Metrics: the
// runners by phase and what the sweep did, and the pool's queue as the decision
// saw it — queued jobs, the oldest one's age, whether the pool is saturated or a
// scale-down is held, reservations extended (by the sweeper, before the
// reconcile), runners pending with a known reason, and the registration time of
// runners GitHub listed for the first time.
func (r *Reconciler) emit(s *sweep, took time.Duration) {
	ph := s.st.Phases
	s.log.Info("pool reconciled", "desired", s.d.Desired, "phases", ph, "created", s.stats.created, "marked", s.stats.marked,
		"deleted", s.stats.deleted, "githubCalls", s.gh.callCount(), "took", took)
	if r.opts.Metrics == nil {
		return
	}
	if err := r.opts.Metrics.Write(emf.Record{Time: s.now, Dimensions: map[string]string{"Pool": s.p.Name},
		Metrics: r.poolMetrics(s, took)}); err != nil {
		s.log.Warn("cannot write the pool's metrics", "error", err)
	}
}

func (r *Reconciler) poolMetrics(s *sweep, took time.Duration) []emf.Metric {
	ph := s.st.Phases
	oldest := 0.0
	if !s.d.OldestQueued.IsZero() {
		oldest = s.now.Sub(s.d.OldestQueued).Seconds()
	}
	ms := []emf.Metric{
		{Name: "Desired", Unit: emf.Count, Value: float64(s.d.Desired)},
		{Name: "Running", Unit: emf.Count, Value: float64(ph[string(Running)])},
		{Name: "Pending", Unit: emf.Count, Value: float64(ph[string(Pending)])},
		{Name: "Created", Unit: emf.Count, Value: float64(s.stats.created)},
		{Name: "Deleting", Unit: emf.Count, Value: float64(ph[string(Stopping)] + ph[string(Terminating)] + ph[string(Finishing)])},
		{Name: "GitHubCalls", Unit: emf.Count, Value: float64(s.gh.callCount())},
		{Name: "SweepDuration", Unit: emf.Milliseconds, Value: float64(took.Milliseconds())},
		{Name: "QueuedJobs", Unit: emf.Count, Value: float64(s.d.Queued)},
		{Name: "OldestQueuedAge", Unit: emf.Seconds, Value: oldest},
		{Name: "Saturated", Unit: emf.None, Value: flag(s.d.Saturated)},
		{Name: "Held", Unit: emf.None, Value: flag(s.d.Held)},
		{Name: "Extended", Unit: emf.Count, Value: float64(s.st.Extended)},
		{Name: "PendingWithReason", Unit: emf.Count, Value: float64(len(s.stuck))},
	}
	for _, signal := range []string{signalGitHub, signalPodReport, signalJobLink, signalIdleWindow, signalWorkflowPod} {
		ms = append(ms, emf.Metric{Name: "RemovalsVetoedBy" + signal, Unit: emf.Count, Value: float64(s.stats.vetoed[signal])})
	}
	ms = append(ms, emf.Metric{Name: "BusySignalDisagreements", Unit: emf.Count, Value: float64(s.stats.disagreements)},
		emf.Metric{Name: "RemovalsForbidden", Unit: emf.Count, Value: float64(s.stats.forbidden)},
		emf.Metric{Name: "ForeignObjects", Unit: emf.Count, Value: float64(len(s.foreign))},
		emf.Metric{Name: "WorkflowPodsRemoved", Unit: emf.Count, Value: float64(s.stats.workflowPodsRemoved)},
		emf.Metric{Name: "GitHubListsDeferred", Unit: emf.None, Value: flag(s.gh.deferral() != "")})
	if len(s.stats.windows) > 0 {
		values := make([]float64, len(s.stats.windows))
		for i, d := range s.stats.windows {
			values[i] = float64(d.Microseconds()) / 1000
		}
		ms = append(ms, emf.Metric{Name: "RemovalCheckWindow", Unit: emf.Milliseconds, Values: values})
	}
	if rate, ok := r.rateRemaining(); ok {
		ms = append(ms, emf.Metric{Name: "GitHubRateRemaining", Unit: emf.Count, Value: float64(rate)})
	}
	if len(s.stats.registrations) > 0 {
		values := make([]float64, len(s.stats.registrations))
		for i, d := range s.stats.registrations {
			values[i] = d.Seconds()
		}
		ms = append(ms, emf.Metric{Name: "RunnerRegistrationTime", Unit: emf.Seconds, Values: values})
	}
	return append(ms, rerunMetrics(s.stats.reruns)...)
}

// rerunMetrics: runner deaths recorded, failed jobs re-run, left failed and
// refused by GitHub, and the time from each re-run job's failure to its re-run.
func rerunMetrics(c rerunCounts) []emf.Metric {
	ms := []emf.Metric{
		{Name: "RunnerDeaths", Unit: emf.Count, Value: float64(c.deaths)},
		{Name: "JobsRerun", Unit: emf.Count, Value: float64(c.rerun)},
		{Name: "FailedJobsNotRerun", Unit: emf.Count, Value: float64(c.notRerun)},
		{Name: "RerunsRefused", Unit: emf.Count, Value: float64(c.refused)},
	}
	if len(c.delays) > 0 {
		values := make([]float64, len(c.delays))
		for i, d := range c.delays {
			values[i] = d.Seconds()
		}
		ms = append(ms, emf.Metric{Name: "RerunDelay", Unit: emf.Seconds, Values: values})
	}
	return ms
}

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// rateStats is the part of githubapi.Client that says how much rate limit is left.
type rateStats interface{ Stats() githubapi.Stats }

// rateRemaining is the primary rate limit left as GitHub last said, if the
// GitHub client tells (githubapi.Client does, after its first answer).
func (r *Reconciler) rateRemaining() (int, bool) {
	rs, ok := r.gh.(rateStats)
	if !ok {
		return 0, false
	}
	st := rs.Stats()
	return st.RateRemaining, st.RateKnown
}
