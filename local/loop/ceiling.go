package loop

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// judgeCeiling records a violation when a pool has more runners able to take a
// job than its maxReplicas: StatefulSets that exist and are not being deleted,
// stopping or not, whose runner has not ended a job by the simulator's truth.
// A runner whose job ended takes no other (ephemeral) and may be replaced while
// its container exits, so it is not counted; a persistent pool's runners all
// are. The StatefulSets are listed before the jobs are read, so a job that
// ends between the two reads only makes the count smaller. A draining pool
// is not judged: its ceiling bounds creations, and it keeps its busy runners
// until their jobs end. (A pools file deployed with a lower maxReplicas would
// be judged on its new ceiling at once; no run does that.)
// jobs reads the simulator's jobs (Sim.Jobs).
func (l *Loop) judgeCeiling(ctx context.Context, jobs func() []githubsim.Job) {
	for _, p := range l.Pools().Pools {
		if p.IsDraining() {
			continue
		}
		list, err := l.opts.Kube.AppsV1().StatefulSets(p.Kubernetes.Namespace).List(ctx,
			metav1.ListOptions{LabelSelector: runnerpod.LabelPool + "=" + p.Name})
		if err != nil {
			continue
		}
		ended := map[string]bool{}
		if p.IsEphemeral() {
			for _, j := range jobs() {
				if !j.EndedAt.IsZero() && j.RunnerName != "" {
					ended[j.RunnerName] = true
				}
			}
		}
		var able []string
		for _, s := range list.Items {
			if s.DeletionTimestamp == nil && !ended[runnerpod.PodName(s.Name)] {
				able = append(able, s.Name)
			}
		}
		if len(able) > p.Max() {
			l.Monitor.violateOnce("ceiling "+p.Name, "pool %s had %d runners able to take a job, over its maxReplicas %d: %v",
				p.Name, len(able), p.Max(), able)
		}
	}
}
