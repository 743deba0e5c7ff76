package reconcile

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// Phase classifies a runner (its StatefulSet and pod) as ARC's getPodsForOwner does.
type Phase string

// Phases, counted in the pool status.
const (
	Pending     Phase = "pending"
	Running     Phase = "running"
	Completed   Phase = "completed"
	TimedOut    Phase = "registration-timed-out"
	Terminating Phase = "terminating"
	// Finishing: an ephemeral runner whose job is completed, its container
	// not exited yet; it holds no slot (finishing.go).
	Finishing Phase = "finishing"
	// Stopping counts runners marked for unregistration (scale-down, replacement).
	Stopping Phase = "stopping"
)

// runner is one StatefulSet of the pool and its pod (nil until the controller made it).
type runner struct {
	sts *appsv1.StatefulSet
	pod *corev1.Pod
	// id is the runner's roster entry: its identity (identity.go).
	id    *roster.Runner
	phase Phase
	// deleted: this sweep deleted the StatefulSet (its slot is free).
	deleted bool
	// stale: another writer changed the runner since this sweep read it
	// (ErrStale): the sweep leaves it alone.
	stale bool
}

func (r *runner) name() string { return r.sts.Name }

func (r *runner) marked() bool {
	_, ok := r.sts.Annotations[runnerpod.AnnotationUnregistrationRequest]
	return ok
}

func (r *runner) outdated(hash string) bool { return r.sts.Labels[runnerpod.LabelTemplateHash] != hash }

// runnerID is the GitHub runner id: the one the roster recorded (from the JIT
// config, or at registration), else observed at registration (pod
// annotation) or known from the JIT config (StatefulSet annotation) and not
// recorded yet. 0 when unknown.
func (r *runner) runnerID() int64 {
	if r.id != nil && r.id.GitHubID != 0 {
		return r.id.GitHubID
	}
	for _, m := range []map[string]string{podAnnotations(r.pod), r.sts.Annotations} {
		if id, err := strconv.ParseInt(m[runnerpod.AnnotationRunnerID], 10, 64); err == nil && id > 0 {
			return id
		}
	}
	return 0
}

// registered: GitHub has listed this runner online or busy (the pod annotation is set then).
func (r *runner) registered() bool {
	_, ok := podAnnotations(r.pod)[runnerpod.AnnotationRunnerID]
	return ok
}

// createdAt is when the sweeper created the runner (its sync-time annotation, on
// the sweeper's clock), from which the registration timeout runs.
func (r *runner) createdAt() time.Time {
	if t, err := time.Parse(time.RFC3339, r.sts.Annotations[runnerpod.AnnotationSyncTime]); err == nil {
		return t
	}
	return r.sts.CreationTimestamp.Time
}

func podAnnotations(p *corev1.Pod) map[string]string {
	if p == nil {
		return nil
	}
	return p.Annotations
}

// observe lists the pool's StatefulSets and pods and reads its roster (three
// calls, concurrently), ties each object to its runner's roster entry
// (identity.go) and classifies the runners. Only this deployment's objects
// (ours) that the roster ties to a runner by UID are the pool's: any other
// object carrying the pool label is not counted, stopped or deleted, and no
// runner id it records reaches GitHub.
func (r *Reconciler) observe(ctx context.Context, s *sweep) error {
	p := s.p
	sel := labels.SelectorFromSet(labels.Set{runnerpod.LabelPool: p.Name}).String()
	ns := p.Kubernetes.Namespace
	var (
		stss             *appsv1.StatefulSetList
		pods             *corev1.PodList
		live             []roster.Runner
		podsErr, liveErr error
		wg               sync.WaitGroup
	)
	wg.Go(func() { pods, podsErr = r.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel}) })
	wg.Go(func() { live, liveErr = r.opts.Roster.Live(ctx, p.Name) })
	wg.Go(func() { r.listHookObjects(ctx, s) })
	stss, err := r.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	wg.Wait()
	switch {
	case err != nil:
		return fmt.Errorf("listing statefulsets of pool %s: %w", p.Name, err)
	case podsErr != nil:
		return fmt.Errorf("listing pods of pool %s: %w", p.Name, podsErr)
	case liveErr != nil:
		return liveErr
	}
	ids := newIdentities(live, ns)
	s.roster = ids.byName
	// Every runner name an object of the pool's namespace carries, ours or
	// not, foreign or not: a live entry none names has nothing left
	// (retireEmpty).
	s.named = map[string]bool{}
	for i := range pods.Items {
		s.named[pods.Items[i].Name] = true
	}
	for i := range stss.Items {
		s.named[runnerpod.PodName(stss.Items[i].Name)] = true
	}
	pods.Items = slices.DeleteFunc(pods.Items, func(o corev1.Pod) bool { return !r.ours(o.ObjectMeta) })
	stss.Items = slices.DeleteFunc(stss.Items, func(o appsv1.StatefulSet) bool { return !r.ours(o.ObjectMeta) })
	// A StatefulSet's pod is the one it controls under its one pod name: a pod
	// of another name claiming it as its controller (which anyone who can
	// create pods can write) is not its runner's pod.
	byOwner := map[string]*corev1.Pod{}
	byUID := map[types.UID]*corev1.Pod{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		byUID[pod.UID] = pod
		if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "StatefulSet" && pod.Name == runnerpod.PodName(ref.Name) {
			byOwner[string(ref.UID)] = pod
		}
	}
	claimed, attached := map[types.UID]bool{}, map[types.UID]bool{}
	for i := range stss.Items {
		sts := &stss.Items[i]
		e, err := r.claimStatefulSet(ctx, s, ids, sts)
		if err != nil {
			return err
		}
		if e == nil {
			continue
		}
		if !e.Retired.IsZero() {
			// Its runner was retired and its deletion cut short: the
			// StatefulSet goes (finishRetired); its pod is an orphan of the
			// retired runner (orphanEntry), stopped like any (finishOrphans).
			if sts.DeletionTimestamp == nil {
				s.retired = append(s.retired, &runner{sts: sts, pod: byOwner[string(sts.UID)], id: e})
			}
			continue
		}
		claimed[sts.UID] = true
		rn := &runner{sts: sts, pod: byOwner[string(sts.UID)], id: e}
		if rn.pod == nil {
			// Its pod, released by the garbage collector a moment ago (the
			// StatefulSet being deleted with --cascade=orphan), is still its
			// runner's: a runner whose pod runs is never taken for one with none.
			rn.pod = recordedPod(e, byUID)
		}
		if rn.pod != nil {
			attached[rn.pod.UID] = true
			if _, err := r.claimPod(ctx, s, e, rn.pod); err != nil {
				return err
			}
		}
		rn.phase = r.classify(rn, s.now, p.IsEphemeral())
		s.runners = append(s.runners, rn)
	}
	// Oldest first: scale-down keeps the oldest, as ARC.
	sort.SliceStable(s.runners, func(i, j int) bool {
		return s.runners[i].sts.CreationTimestamp.Before(&s.runners[j].sts.CreationTimestamp)
	})
	for _, pod := range orphans(pods.Items, claimed, attached) {
		e, err := r.orphanEntry(ctx, s, ids, pod)
		if err != nil {
			return err
		}
		if e != nil {
			s.orphans = append(s.orphans, orphanRunner(pod, e, s.now))
		}
	}
	return nil
}

// recordedPod is the pod of the runner e's name whose UID e recorded, or that
// no controller claims (released by its StatefulSet before a sweep recorded
// it), if the pool's pods hold one: while the StatefulSet exists, no other
// pod can have its one pod name.
func recordedPod(e *roster.Runner, byUID map[types.UID]*corev1.Pod) *corev1.Pod {
	for _, uid := range e.PodUIDs {
		if pod := byUID[types.UID(uid)]; pod != nil && pod.Name == e.Name {
			return pod
		}
	}
	for _, pod := range byUID {
		if pod.Name == e.Name && metav1.GetControllerOf(pod) == nil {
			return pod
		}
	}
	return nil
}

// classify follows ARC's getPodsForOwner, with the lifecycle rules of
// docs/concepts.md ("Runner lifecycle"):
// completed (the runner finished: see finished), terminating, finishing (its
// job completed a moment ago, its container still running: finishing.go), running,
// registration-timed-out (not registered the registration timeout after the
// runner was created — as ARC, from creation, whether or not the pod ever became
// Ready: a pod that cannot be scheduled, pull its image or stay up holds no slot
// forever), pending.
func (r *Reconciler) classify(rn *runner, now time.Time, ephemeral bool) Phase {
	pod := rn.pod
	switch {
	case pod == nil:
		if now.Sub(rn.createdAt()) >= r.opts.RegistrationTimeout {
			return TimedOut // the controller cannot create the pod (admission, quota, service account)
		}
		return Pending
	case finished(pod, ephemeral):
		return Completed
	case pod.DeletionTimestamp != nil:
		return Terminating
	case ephemeral && r.finishing(rn, now):
		return Finishing
	case rn.registered():
		if pod.Status.Phase == corev1.PodRunning && runnerRunning(pod) {
			return Running
		}
		return Pending
	case now.Sub(rn.createdAt()) >= r.opts.RegistrationTimeout:
		return TimedOut
	}
	if pod.Status.Phase == corev1.PodRunning && runnerRunning(pod) {
		return Running
	}
	return Pending
}

// finished reports whether the runner in pod has run to its end. Container state
// decides only when the sweeper asks GitHub to release the runner, never whether:
// a runner whose id is known is deleted only after RemoveRunner answered 204 or
// 404 (stop.go).
//
// An ephemeral runner runs once: the entrypoint leaves a marker in the pod's
// state volume before it starts the runner and, when the kubelet restarts the
// container, finds it and exits at once instead of running again with spent
// credentials (runner/entrypoint.sh). So an ephemeral runner container that has
// terminated at least once — now terminated, restarted, or in CrashLoopBackOff —
// is finished, whatever its exit code, unless its last exit came before its
// runner started (the entrypoint says so in its termination message:
// notStarted): a first start that failed before the marker (its docker sidecar
// not ready, config.sh refused) is started again, and its runner registers and
// takes a job like a first start. A persistent runner keeps its registration
// across restarts: only its current state counts (exited 0, as ARC's
// runnerPodOrContainerIsStopped).
func finished(pod *corev1.Pod, ephemeral bool) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return true
	}
	cs := runnerStatus(pod)
	if cs == nil {
		return false
	}
	if ephemeral {
		return (lastEnd(cs) != nil || cs.RestartCount > 0) && !notStarted(cs)
	}
	return cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
}

func runnerStatus(pod *corev1.Pod) *corev1.ContainerStatus { return runnerpod.RunnerStatus(pod) }

// lastEnd is the runner container's latest end the kubelet shows: its current
// state when terminated, else the end before its current state (running, or
// waiting to be started again); nil when it shows none.
func lastEnd(cs *corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	if cs.State.Terminated != nil {
		return cs.State.Terminated
	}
	return cs.LastTerminationState.Terminated
}

// notStartedMessage begins the termination message of a runner container that
// has not started its runner (runner/entrypoint.sh: from its first line until
// the runner starts, and at an exit before that).
const notStartedMessage = "runner not started:"

// ranMessages begin the termination messages the entrypoint writes only once
// its runner has started — an ephemeral one's run marker written first
// (runner/entrypoint.sh, say_ran, exit_again) — or once GitHub refused the
// runner's version (record_refusal: no start of the image can take a job).
var ranMessages = []string{"runner ran:", "runner died:", "runner refused by GitHub:"}

// notStarted: the runner container's last exit came before its runner started
// — the entrypoint says so in its termination message, which it writes from
// its first line on, so that a SIGKILL before the run marker (an OOM kill
// while configuring) leaves it too; or the runtime could not start the
// container at all (neverRan): started again, it runs like a first start.
func notStarted(cs *corev1.ContainerStatus) bool {
	last := lastEnd(cs)
	return last != nil && (neverRan(last) || strings.HasPrefix(strings.TrimSpace(last.Message), notStartedMessage))
}

// spent: an ephemeral runner container's last end says its runner had
// started (ranMessages): the run marker is in the pod's state volume, root's
// alone, so every later start of the container exits at once without running
// the runner (runner/entrypoint.sh, exit_again) — even one the pod's status
// shows running; or GitHub refused its version, and refuses every start. This, not the container's state, is what lets a finished
// ephemeral runner be released without waiting: no start of its pod can take
// a job. A job step cannot write the termination message (the entrypoint
// makes it root's); were it able to, the message it could leave is true
// anyway once a job ran, and a false "not started" only holds the runner
// longer.
func spent(cs *corev1.ContainerStatus) bool {
	if cs == nil {
		return false
	}
	last := lastEnd(cs)
	if last == nil {
		return false
	}
	msg := strings.TrimSpace(last.Message)
	for _, prefix := range ranMessages {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// everRan reports whether the pod may have started its runner: once it is bound
// to a node, the kubelet may be starting the container before its status says so.
func everRan(pod *corev1.Pod) bool {
	return pod != nil && (pod.Spec.NodeName != "" || pod.Status.Phase != corev1.PodPending || len(pod.Status.ContainerStatuses) > 0)
}
