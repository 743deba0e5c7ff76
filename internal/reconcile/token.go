package reconcile

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// clearTokens removes the registration token from the Secret of every token
// runner that GitHub has listed (registered: its pod has the runner id), in the
// sweep that sees it registered. The token registers any runner in the scope for
// up to an hour, and a registered runner no longer needs it: a restarted
// container resumes the registration it kept (persistent) or exits on its run
// marker (ephemeral), runner/entrypoint.sh. Its container reads the token from
// the Secret's file (runnerpod.TokenFile), which the kubelet removes at its next
// sync of the pod; so a job that can read what its container can (docker, a
// template's user: see pool.TokenReadable) finds none once the runner
// registered, save in that sync's delay, and the node's credentials read no
// token of a registered runner in the Secrets of the pods on the node.
//
// The token-expires-at annotation on the StatefulSet is the record that the
// Secret holds a token; it is removed once the token is, so a removal that
// fails is tried again by the next sweep, and a cleared runner costs no read.
// A runner that GitHub never listed (an ephemeral one that finished before a
// sweep looked) keeps its token until it is deleted with its Secret. Failures
// are logged: the next sweep retries.
func (r *Reconciler) clearTokens(ctx context.Context, s *sweep) {
	for _, rn := range s.runners {
		if rn.stale || rn.deleted || !rn.registered() {
			continue
		}
		if _, held := rn.sts.Annotations[runnerpod.AnnotationTokenExpiresAt]; !held {
			continue
		}
		if err := r.clearToken(ctx, s, rn); err != nil {
			s.log.Warn("cannot remove the registration token of a registered runner; the next sweep retries", "runner", rn.name(), "error", err)
		}
	}
}

// clearToken removes the token from the runner's own Secret (runnerSecret: of
// this deployment, owned by no other StatefulSet), fenced by the Secret's
// version, then the StatefulSet's token-expires-at annotation. A runner with no
// such Secret has no token of ours to remove.
func (r *Reconciler) clearToken(ctx context.Context, s *sweep, rn *runner) error {
	sec, err := r.runnerSecret(ctx, s, rn)
	if err != nil {
		return err
	}
	if sec != nil && sec.Data[runnerpod.SecretToken] != nil {
		delete(sec.Data, runnerpod.SecretToken)
		if _, err := r.kube.CoreV1().Secrets(sec.Namespace).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("removing the registration token from secret %s: %w", sec.Name, err)
		}
	}
	sts, err := patchAnnotations(ctx, r.fencedStatefulSets(rn.sts.Namespace), rn.sts, map[string]any{runnerpod.AnnotationTokenExpiresAt: nil})
	if err != nil {
		rn.noteStale(err)
		return fmt.Errorf("removing annotation %s of statefulset %s: %w", runnerpod.AnnotationTokenExpiresAt, rn.name(), err)
	}
	rn.sts = sts
	s.log.Info("registration token removed from a registered runner's secret", "runner", rn.name())
	return nil
}
