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

// withdraw removes the custom labels of an idle runner on GitHub right before
// drain deletes its pod, and records it on the pod (AnnotationLabelsRemoved).
//
// GitHub hands a queued job to any online runner whose labels cover the job's,
// at any moment until the runner's listener has closed its session. A listener
// told to stop in the instant GitHub hands it a job cancels that job (the
// runner's own behaviour, which the entrypoint cannot change). Without its
// custom labels the runner matches no job that asks for one of them: GitHub can
// no longer hand it a job of its pool, so the listener's stop loses none. A
// job handed over before the labels went is seen by the entrypoint, which lets
// it finish (runner/entrypoint.sh, "Stopping").
//
// The runner must be ours first (ownsID): GitHub lists its id under its pod's
// name. A runner GitHub does not know (404) cannot be handed a job; one GitHub
// refuses to change (403: the App may not manage runners, so it cannot remove
// them either) is drained as if it had no labels to remove, with a warning.
// Any other failure waits for the next sweep: the pod is not deleted. The
// labels are not put back: a runner being stopped never takes jobs again.
func (s *stopper) withdraw(ctx context.Context) error {
	if s.id == 0 || withdrawn(s.rn.pod) {
		return nil
	}
	// The id comes from an annotation anyone who can write a runner pod can
	// forge: the labels of a runner GitHub lists under another name (another
	// team's, an ARC runner) are never touched, and one it does not list has none.
	_, owned, err := s.ownsID(ctx)
	switch {
	case err != nil:
		s.log.Warn("cannot list runners to check whose the runner id is; retrying next sweep", "id", s.id, "error", err)
		return errWait
	case !owned:
		return nil
	}
	err = s.gh.removeLabels(ctx, s.p.Scope(), s.id)
	switch {
	case err == nil || errors.Is(err, githubapi.ErrNotFound):
	case errors.Is(err, githubapi.ErrForbidden):
		s.log.Warn("GitHub refused to remove the runner's labels: stopping it with them; a job GitHub hands it as its listener stops is cancelled", "id", s.id, "error", err)
		return nil
	default:
		s.log.Warn("removing the runner's labels before stopping it failed; retrying next sweep", "id", s.id, "error", err)
		return errWait
	}
	s.log.Info("runner's custom labels removed: GitHub hands it no job of its pool while it stops", "id", s.id)
	err = s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationLabelsRemoved, stamp(s.now))
	if errors.Is(err, ErrStale) {
		// The pod changed since its busy signals were read (it may have taken
		// a job): decided on again next sweep. The runner is being stopped
		// either way, so its missing labels cost no job.
		s.log.Info("runner pod changed since its busy signals were read: deciding next sweep")
		return errWait
	}
	return err
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
