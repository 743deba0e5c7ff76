package reconcile

import (
	"encoding/json"
	"time"
)

// emit logs one line per pool sweep and writes its CloudWatch Embedded Metric
// Format record (namespace runnerscaler, dimension Pool) to opts.Metrics.
func (r *Reconciler) emit(s *sweep, took time.Duration) {
	ph := s.st.Phases
	s.log.Info("pool reconciled", "desired", s.d.Desired, "phases", ph, "created", s.created, "marked", s.marked,
		"deleted", s.deleted, "githubCalls", s.gh.callCount(), "took", took)
	if r.opts.Metrics == nil {
		return
	}
	values := map[string]any{
		"Desired": s.d.Desired, "Running": ph[string(Running)], "Pending": ph[string(Pending)],
		"Created": s.created, "Deleting": ph[string(Stopping)] + ph[string(Terminating)],
		"GitHubCalls": s.gh.callCount(), "SweepDuration": took.Milliseconds(),
	}
	metrics := []map[string]string{}
	for _, name := range []string{"Desired", "Running", "Pending", "Created", "Deleting", "GitHubCalls"} {
		metrics = append(metrics, map[string]string{"Name": name, "Unit": "Count"})
	}
	metrics = append(metrics, map[string]string{"Name": "SweepDuration", "Unit": "Milliseconds"})
	values["Pool"] = s.p.Name
	values["_aws"] = map[string]any{
		"Timestamp": s.now.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace": "runnerscaler", "Dimensions": [][]string{{"Pool"}}, "Metrics": metrics,
		}},
	}
	line, _ := json.Marshal(values)
	_, _ = r.opts.Metrics.Write(append(line, '\n'))
}
