package loop

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// watchWaits records a violation for every job that has been queued longer than
// the wait bound while its pool had room for another runner (fewer runners than
// maxReplicas, not counting those being stopped). Each job is reported once.
func (l *Loop) watchWaits(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	reported := map[int64]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cfg := l.Pools()
		for _, j := range l.Sim.Jobs() {
			if j.State != githubsim.JobQueued || reported[j.ID] || time.Since(j.QueuedAt) < l.opts.WaitBound {
				continue
			}
			p, _ := cfg.Route(pool.Job{Repository: j.Repository, Organization: j.Organization, Enterprise: j.Enterprise, Labels: j.Labels})
			if p == nil {
				continue
			}
			if n, ok := l.activeRunners(ctx, p); ok && n < p.Max() {
				reported[j.ID] = true
				l.Monitor.Violate("job %d queued for %s while pool %s had %d of %d runners", j.ID,
					time.Since(j.QueuedAt).Round(time.Second), p.Name, n, p.Max())
			}
		}
	}
}

// activeRunners counts the pool's StatefulSets not being stopped.
func (l *Loop) activeRunners(ctx context.Context, p *pool.Pool) (int, bool) {
	list, err := l.opts.Kube.AppsV1().StatefulSets(p.Kubernetes.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runnerpod.LabelPool + "=" + p.Name})
	if err != nil {
		return 0, false
	}
	n := 0
	for _, s := range list.Items {
		if _, marked := s.Annotations[runnerpod.AnnotationUnregistrationRequest]; !marked && s.DeletionTimestamp == nil {
			n++
		}
	}
	return n, true
}
