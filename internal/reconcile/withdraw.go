package reconcile

import (
	"context"
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// withdraw removes the custom labels of an idle runner on GitHub (the last
// act of stopRunning) and records it on the pod (AnnotationLabelsRemoved):
// the runner moves to stopWithdrawn, whose step deletes its pod.
//
// GitHub hands a queued job to any online runner whose labels cover the job's,
// at any moment until the runner's listener has closed its session. A listener
// told to stop in the instant GitHub hands it a job cancels that job (the
// runner's own behaviour, which the entrypoint cannot change). Without its
// custom labels the runner matches no job that asks for one of them: GitHub can
// no longer hand it a job of its pool, so the listener's stop loses none. A
// job handed over before the labels went shows in the pod's report or the link,
// which stopWithdrawn reads again right before the delete, or is seen by the
// entrypoint, which lets it finish (runner/entrypoint.sh, "Stopping").
//
// The runner must be ours first (owned): GitHub lists its id under its pod's
// name; the labels of a runner GitHub lists under another name (another
// team's, an ARC runner) are never touched, and one it does not list has none.
// One GitHub refuses to change (403: the App may not manage runners, so it
// cannot remove them either) is drained with its labels, with a warning. Any
// other failure waits for the next sweep. The labels are not put back: a
// runner being stopped never takes jobs again.
func (s *stop) withdraw(ctx context.Context, l listing) (next, error) {
	id := s.rn.runnerID()
	if !l.found {
		return moveTo(stopWithdrawn), nil // GitHub does not list it: it has no labels to match a job
	}
	if want := runnerpod.PodName(s.rn.name()); l.Name != want {
		s.log.Error("the runner id this runner's objects record is another GitHub runner's: not touching it",
			"id", id, "githubName", l.Name, "want", want)
		return moveTo(stopWithdrawn), nil
	}
	err := s.gh.removeLabels(ctx, s.p.Scope(), id)
	switch {
	case err == nil || errors.Is(err, githubapi.ErrNotFound):
	case errors.Is(err, githubapi.ErrForbidden):
		s.log.Warn("GitHub refused to remove the runner's labels: stopping it with them; a job GitHub hands it as its listener stops is cancelled", "id", id, "error", err)
		return moveTo(stopWithdrawn), nil
	default:
		s.log.Warn("removing the runner's labels before stopping it failed; retrying next sweep", "id", id, "error", err)
		return waitFor("the removal of the runner's labels"), nil
	}
	s.log.Info("runner's custom labels removed: GitHub hands it no job of its pool while it stops", "id", id)
	err = s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationLabelsRemoved, stamp(s.now))
	if errors.Is(err, ErrStale) {
		// The pod's progress changed since the sweep read it (another writer):
		// decided on again next sweep. The runner is being stopped either way,
		// so its missing labels cost no job.
		return waitFor("the pod, which another writer changed"), nil
	}
	return derived(), err
}

// withdrawn: the runner's custom labels were removed (withdraw).
func withdrawn(pod *corev1.Pod) bool {
	_, ok := podAnnotations(pod)[runnerpod.AnnotationLabelsRemoved]
	return ok
}

// lacksLabels: the pool has custom labels and the runner, as GitHub lists it,
// has none of them (compared case-insensitively): they were removed.
func lacksLabels(runner, pool []string) bool {
	return len(pool) > 0 && !slices.ContainsFunc(pool, func(l string) bool {
		return slices.ContainsFunc(runner, func(r string) bool { return strings.EqualFold(r, l) })
	})
}
