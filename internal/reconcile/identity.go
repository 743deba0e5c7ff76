package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// A runner's identity is its roster entry (package roster), never what an
// object says of itself. Anyone who may create a pod or a Secret in a runner
// namespace can give it a runner's name, the pool label, this deployment's
// annotation, our finalizer and an owner reference; what the sweeper acts on
// is only what it ties to a live entry of the pool's roster by UID:
//
//   - a StatefulSet: the one whose UID the entry of its name recorded (or, when
//     the entry recorded none, the StatefulSet of that name, whose UID is
//     recorded then: a sweep ended between its creation and the record);
//   - its pod: the pod of the StatefulSet's one pod name that the StatefulSet
//     controls, or that no controller claims (released by the StatefulSet);
//     its UID is recorded at first sight, before any step can act on it;
//   - an orphan (a pod with our finalizer whose StatefulSet is gone): a pod
//     whose UID the entry recorded, or the pod of the runner's name that the
//     entry's recorded StatefulSet controlled (or no controller claims, for a
//     live entry) — of a live entry, or of one retired since (a pod the
//     StatefulSet controller created as its runner was being deleted);
//   - a Secret: the one whose UID the entry recorded (or, when it recorded
//     none, the Secret of the runner's name, recorded then);
//   - a GitHub runner: the id the entry recorded, under the entry's name.
//
// Anything else is foreign: it is never a reason for a GitHub call, a Secret
// deletion, a label withdrawal, a roster retirement or a recorded death. It
// is left alone, counted (ForeignObjects), named in the pool status and
// logged once per sweep.

// identities is the pool's live roster, as read for one sweep.
type identities struct {
	byName map[string]*roster.Runner // by GitHub (pod) name
	byPod  map[string]*roster.Runner // by pod UID
	bySTS  map[string]*roster.Runner // by StatefulSet UID
}

func newIdentities(live []roster.Runner, namespace string) identities {
	ids := identities{byName: map[string]*roster.Runner{}, byPod: map[string]*roster.Runner{}, bySTS: map[string]*roster.Runner{}}
	for i := range live {
		e := &live[i]
		if e.Namespace != "" && e.Namespace != namespace {
			continue // a runner of the pool's earlier namespace: not in this one
		}
		ids.byName[e.Name] = e
		for _, uid := range e.PodUIDs {
			ids.byPod[uid] = e
		}
		if e.StatefulSetUID != "" {
			ids.bySTS[e.StatefulSetUID] = e
		}
	}
	return ids
}

// claimStatefulSet returns the entry sts belongs to, nil when none (foreign).
func (r *Reconciler) claimStatefulSet(ctx context.Context, s *sweep, ids identities, sts *appsv1.StatefulSet) (*roster.Runner, error) {
	e := ids.byName[runnerpod.PodName(sts.Name)]
	switch {
	case e == nil:
		ret, err := r.retiredEntry(ctx, s, runnerpod.PodName(sts.Name), func(e roster.Runner) bool { return e.StatefulSetUID == string(sts.UID) })
		if err != nil || ret != nil {
			return ret, err
		}
		s.noteForeign("statefulset", sts.Name, "no runner of its name on the roster")
		return nil, nil
	case e.StatefulSetUID == string(sts.UID):
		return e, nil
	case e.StatefulSetUID != "":
		s.noteForeign("statefulset", sts.Name, "the roster records another StatefulSet for its runner")
		return nil, nil
	}
	return r.recordUID(ctx, s, e, "statefulset", sts.Name, roster.Record{StatefulSetUID: string(sts.UID)}, func() { e.StatefulSetUID = string(sts.UID) })
}

// claimPod records the UID of the pod a runner's StatefulSet controls, once:
// should the StatefulSet go, the pod is still known as the runner's.
func (r *Reconciler) claimPod(ctx context.Context, s *sweep, e *roster.Runner, pod *corev1.Pod) (*roster.Runner, error) {
	if e.HasPod(string(pod.UID)) {
		return e, nil
	}
	return r.recordUID(ctx, s, e, "pod", pod.Name, roster.Record{PodUID: string(pod.UID)}, func() { e.PodUIDs = append(e.PodUIDs, string(pod.UID)) })
}

// claimSecret returns the entry an ownerless Secret belongs to, nil when none.
func (r *Reconciler) claimSecret(ctx context.Context, s *sweep, sec *corev1.Secret) (*roster.Runner, error) {
	e := s.roster[runnerpod.PodName(sec.Name)]
	switch {
	case e == nil:
		ret, err := r.retiredEntry(ctx, s, runnerpod.PodName(sec.Name), func(e roster.Runner) bool { return e.SecretUID == string(sec.UID) })
		if err != nil || ret != nil {
			return ret, err
		}
		s.noteForeign("secret", sec.Name, "no runner of its name on the roster")
		return nil, nil
	case e.SecretUID == string(sec.UID):
		return e, nil
	case e.SecretUID != "":
		s.noteForeign("secret", sec.Name, "the roster records another Secret for its runner")
		return nil, nil
	}
	return r.recordUID(ctx, s, e, "secret", sec.Name, roster.Record{SecretUID: string(sec.UID)}, func() { e.SecretUID = string(sec.UID) })
}

// retiredEntry returns the retired entry of the runner name when it recorded
// the object match looks for: a deletion cut short after its retirement
// (deleteRunner and releaseSecret retire the runner before its objects go).
// A runner is retired only once GitHub released it, so what is left of it is
// only to be deleted. nil: none (the object is foreign).
func (r *Reconciler) retiredEntry(ctx context.Context, s *sweep, name string, match func(roster.Runner) bool) (*roster.Runner, error) {
	if !runnername.IsPodOf(s.p.Name, name) {
		return nil, nil
	}
	e, found, err := r.opts.Roster.Lookup(ctx, s.p.Name, name)
	if err != nil || !found || e.Retired.IsZero() || !match(e) || e.Namespace != "" && e.Namespace != s.p.Kubernetes.Namespace {
		return nil, err
	}
	return &e, nil
}

// recordUID records what rec says of e; a refusal (another object already
// recorded, or the runner retired since) makes the object foreign.
func (r *Reconciler) recordUID(ctx context.Context, s *sweep, e *roster.Runner, kind, name string, rec roster.Record, apply func()) (*roster.Runner, error) {
	err := r.opts.Roster.Record(ctx, s.p.Name, e.Name, rec)
	switch {
	case errors.Is(err, roster.ErrNotRecorded):
		s.noteForeign(kind, name, "the roster refused it for its runner")
		return nil, nil
	case err != nil:
		return nil, err
	}
	apply()
	return e, nil
}

// orphanEntry returns the entry an orphan pod belongs to: a live one that
// recorded its UID, or the entry (live, or retired since) of its name whose
// recorded StatefulSet is the pod's controller. nil: foreign.
func (r *Reconciler) orphanEntry(ctx context.Context, s *sweep, ids identities, pod *corev1.Pod) (*roster.Runner, error) {
	if e := ids.byPod[string(pod.UID)]; e != nil {
		return e, nil
	}
	ref := metav1.GetControllerOf(pod)
	controlled := ref != nil && ref.Kind == "StatefulSet" && runnerpod.PodName(ref.Name) == pod.Name
	if controlled {
		if e := ids.bySTS[string(ref.UID)]; e != nil && e.Name == pod.Name {
			return e, nil
		}
	}
	if e := ids.byName[pod.Name]; e != nil && (ref == nil || controlled && string(ref.UID) == e.StatefulSetUID) {
		// The pod of a live runner's own name, released by its StatefulSet
		// (--cascade=orphan) before a sweep recorded its UID. No other pod can
		// have that name while the runner's own pod exists; had the runner's
		// pod gone, a pod made under its name runs no runner of ours, and the
		// stop does for it only what cleanup does for a runner with no pod.
		return r.recordUID(ctx, s, e, "pod", pod.Name, roster.Record{PodUID: string(pod.UID)}, func() { e.PodUIDs = append(e.PodUIDs, string(pod.UID)) })
	}
	if !runnername.IsPodOf(s.p.Name, pod.Name) {
		s.noteForeign("pod", pod.Name, "an orphan the roster knows no runner of")
		return nil, nil
	}
	// A runner retired since: its pod is known by the UID the entry recorded
	// (an orphan whose owner references the garbage collector removed,
	// --cascade=orphan), or by the entry's StatefulSet as its controller.
	e, found, err := r.opts.Roster.Lookup(ctx, s.p.Name, pod.Name)
	if err != nil {
		return nil, err
	}
	if !found || e.Namespace != "" && e.Namespace != pod.Namespace ||
		!e.HasPod(string(pod.UID)) && !(controlled && e.StatefulSetUID == string(ref.UID)) && !legacyOrphan(e, pod, ref, controlled) {
		s.noteForeign("pod", pod.Name, "an orphan the roster knows no runner of")
		return nil, nil
	}
	return &e, nil
}

// legacyOrphan: e is an entry the previous version wrote (name and creation
// time only: no namespace, scope, UID or id), and pod is, by that version's
// rule, its runner's orphan: the runner's own pod name, controlled by the
// StatefulSet of the runner's name or by nothing (its owner references
// removed), created after the entry. Such an orphan was left by a StatefulSet
// deleted before the upgrade, while its stop waited; no UID of it was ever
// recorded, and without this it keeps our finalizer for ever. Only such
// entries are trusted this way, and they end with their runners.
func legacyOrphan(e roster.Runner, pod *corev1.Pod, ref *metav1.OwnerReference, controlled bool) bool {
	legacy := e.Namespace == "" && e.Scope == "" && e.StatefulSetUID == "" && e.SecretUID == "" && len(e.PodUIDs) == 0 && e.GitHubID == 0
	return legacy && pod.Name == e.Name && (ref == nil || controlled) && !pod.CreationTimestamp.Time.Before(e.Created.Add(-time.Minute)) // a minute of clock skew
}

// noteForeign records an object that claims to be a runner's and is not.
func (s *sweep) noteForeign(kind, name, why string) {
	s.foreign = append(s.foreign, fmt.Sprintf("%s %s/%s: %s", kind, s.p.Kubernetes.Namespace, name, why))
}

// logForeign says once per sweep which objects were left alone as foreign.
func (s *sweep) logForeign() {
	if len(s.foreign) > 0 {
		s.log.Warn("foreign objects left alone: they claim to be this pool's runners', but the roster ties none of them to a runner by UID",
			"count", len(s.foreign), "objects", strings.Join(s.foreign, "; "))
	}
}
