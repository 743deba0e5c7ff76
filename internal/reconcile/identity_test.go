package reconcile_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// busyVictim makes one ephemeral runner of e's pool, running a job its pod
// reports (the runner container ready) while GitHub's REST view lies and lists
// it idle: the runner a forged object must not make the sweeper touch.
func busyVictim(t *testing.T, e *env) (name string, id int64) {
	t.Helper()
	e.mustSweep(1, time.Time{})
	name = e.statefulSets()[0]
	victim := e.start(name)
	pod := e.pods()[name]
	pod.Status.ContainerStatuses[0].Ready = true
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(e.clock.Now())}}
	if _, err := e.raw.CoreV1().Pods(e.ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mustSweep(1, time.Time{}) // records its registration
	return name, victim.ID
}

// forgedPod creates, as anyone allowed to create pods in the namespace could,
// an ownerless pod called name that carries everything a runner pod of e's
// pool carries by name, label, annotation and finalizer; bound to a node and
// ended (Succeeded), or never bound.
func forgedPod(t *testing.T, e *env, name string, bound bool, annotations map[string]string) {
	t.Helper()
	real := e.pods()[strings.TrimSuffix(name, "-0")]
	if real == nil {
		for _, p := range e.pods() {
			real = p
		}
	}
	ann := map[string]string{runnerpod.AnnotationDeployment: real.Annotations[runnerpod.AnnotationDeployment]}
	for k, v := range annotations {
		ann[k] = v
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: real.Labels, Annotations: ann,
		Finalizers: []string{runnerpod.Finalizer}}, Spec: *real.Spec.DeepCopy()}
	if bound {
		pod.Spec.NodeName = "forged-node"
	}
	created, err := e.raw.CoreV1().Pods(e.ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bound {
		created.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: runnerpod.ContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.NewTime(e.clock.Now())}}}}}
		if _, err := e.raw.CoreV1().Pods(e.ns).UpdateStatus(t.Context(), created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// victimUntouched fails t unless the victim runner is still registered on
// GitHub with its labels, no RemoveRunner was asked, and its Secret, pod and
// roster entry are there.
func victimUntouched(t *testing.T, e *env, name string, id int64) {
	t.Helper()
	gr, ok := e.sim.Runner(id)
	if !ok {
		t.Fatal("the busy runner was removed from GitHub")
	}
	if !slices.Contains(gr.Labels, "big") {
		t.Fatalf("the busy runner's labels were withdrawn on GitHub: %v", gr.Labels)
	}
	if n := e.sim.Calls()[removeCall]; n != 0 {
		t.Fatalf("%d RemoveRunner calls, want none", n)
	}
	if _, err := e.raw.CoreV1().Secrets(e.ns).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the busy runner's Secret: %v", err)
	}
	pod, err := e.raw.CoreV1().Pods(e.ns).Get(t.Context(), runnerpod.PodName(name), metav1.GetOptions{})
	if err != nil || pod.DeletionTimestamp != nil {
		t.Fatalf("the busy runner's pod: %v (deleting: %v)", err, err == nil && pod.DeletionTimestamp != nil)
	}
	live, err := e.roster.Live(t.Context(), "p")
	if err != nil || !slices.ContainsFunc(live, func(r roster.Runner) bool { return r.Name == runnerpod.PodName(name) }) {
		t.Fatalf("the busy runner is no longer live on the roster (%v): %+v", err, live)
	}
}

// TestForgedOrphanNamedLikeARunnerIsForeign: an ownerless pod named exactly
// like a busy runner's StatefulSet (no -0), carrying the deployment's
// annotation, the pool label and the finalizer — ended on a node, with a
// forged idle-since annotation, or never bound — is tied to no runner by the
// roster: the sweeper makes no GitHub call about the runner, withdraws none of
// its labels, keeps its Secret, pod and roster entry, and names the pod in the
// pool status as a foreign object.
func TestForgedOrphanNamedLikeARunnerIsForeign(t *testing.T) {
	t.Parallel()
	for _, bound := range []bool{true, false} {
		t.Run(fmt.Sprintf("bound=%v", bound), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, true)
			name, id := busyVictim(t, e)
			forgedPod(t, e, name, bound, map[string]string{
				"runnerscaler.dev/github-idle-since": e.clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)})
			for range 3 {
				e.clock.Step(2 * time.Minute)
				e.mustSweep(1, time.Time{})
			}
			victimUntouched(t, e, name, id)
			if !slices.ContainsFunc(e.status.Foreign, func(f string) bool { return strings.Contains(f, "pod "+e.ns+"/"+name+":") }) {
				t.Fatalf("status names foreign objects %q; want the forged pod %s", e.status.Foreign, name)
			}
		})
	}
}

// otherPool is pool q, of the scope of e's pool, in a namespace of its own,
// and its reconciler, which shares e's roster and GitHub (and keeps deaths in
// reruns, when given).
func otherPool(t *testing.T, e *env, reruns *memReruns) (*reconcile.Reconciler, *pool.Config, string) {
	t.Helper()
	_, ns := testenv.Namespace(t)
	cfg, err := pool.Parse(fmt.Appendf(nil, `
pools:
  - name: q
    organization: acme
    labels: [other]
    maxReplicas: 2
    kubernetes: {namespace: %s, image: runner:1}
`, ns))
	if err != nil {
		t.Fatal(err)
	}
	opts := reconcile.Options{JobLinks: e.links, Roster: e.roster}
	if reruns != nil {
		opts.Reruns = reruns
	}
	q, err := reconcile.New(cfg, e.kube, e.gh, e.clock, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	return q, cfg, ns
}

// TestForgedSecretOfAnotherPoolRemovesNoRunner: a Secret named like a busy
// runner of pool p, forged in the namespace of pool q of the same scope and
// labelled as q's (recording the runner's id, written long ago), is foreign to
// q's sweep: no GitHub call, the runner of p kept with its Secret.
func TestForgedSecretOfAnotherPoolRemovesNoRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	name, id := busyVictim(t, e)
	q, cfg, otherNS := otherPool(t, e, nil)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: otherNS,
		Labels: map[string]string{runnerpod.LabelPool: "q"},
		Annotations: map[string]string{runnerpod.AnnotationSyncTime: e.clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339),
			runnerpod.AnnotationRunnerID: idString(id)}}}
	if _, err := e.raw.CoreV1().Secrets(otherNS).Create(t.Context(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var st poolstate.Status
	for range 3 {
		e.clock.Step(2 * time.Hour)
		if err := q.Reconcile(t.Context(), cfg.Pool("q"), scaling.Decision{}, &st); err != nil {
			t.Fatal(err)
		}
	}
	victimUntouched(t, e, name, id)
	if _, err := e.raw.CoreV1().Secrets(otherNS).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the forged Secret was deleted (%v); want a foreign object left alone", err)
	}
	if len(st.Foreign) != 1 || !strings.HasPrefix(st.Foreign[0], "secret "+otherNS+"/"+name+":") {
		t.Fatalf("q's status names foreign objects %q; want the forged Secret", st.Foreign)
	}
}

// TestRestartAfterAKillBeforeTheRunMarkerHolds: an ephemeral runner whose
// container was SIGKILLed before its run marker (an OOM while configuring: no
// termination message) and runs again — taking a job, which GitHub's REST
// view does not show — is held while its container runs, though it looks
// "finished" (it has ended once): no RemoveRunner, its pod kept.
func TestRestartAfterAKillBeforeTheRunMarkerHolds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	victim := e.start(name)
	pod := e.pods()[name]
	started := metav1.NewTime(e.clock.Now())
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: runnerpod.ContainerName, RestartCount: 1, Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled",
			FinishedAt: metav1.NewTime(started.Add(-time.Second))}}}}
	if _, err := e.raw.CoreV1().Pods(e.ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.clock.Step(2 * time.Minute)
		e.mustSweep(0, time.Time{})
	}
	if _, ok := e.sim.Runner(victim.ID); !ok || e.sim.Calls()[removeCall] != 0 {
		t.Fatalf("runner on GitHub: %v, RemoveRunner calls %d; want it kept while its restarted container runs", ok, e.sim.Calls()[removeCall])
	}
}

// TestForgedOrphanRecordsNoDeath: a pod named like a busy runner of pool p —
// its very pod name, forged in the namespace of pool q of the same scope,
// labelled as q's, with the finalizer and no owner — whose runner container
// shows an OOM kill is no runner's for q's sweep: no death is recorded under
// the runner's name (deaths are kept by runner name, whatever the pool), so no
// job of p is re-run for it, and p's runner is untouched.
func TestForgedOrphanRecordsNoDeath(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	name, id := busyVictim(t, e)
	store := newMemReruns()
	q, cfg, otherNS := otherPool(t, e, store)
	real := e.pods()[name]
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: real.Name, Namespace: otherNS, Labels: map[string]string{runnerpod.LabelPool: "q"},
		Finalizers: []string{runnerpod.Finalizer}}, Spec: *real.Spec.DeepCopy()}
	pod.Spec.NodeName = "forged-node"
	created, err := e.raw.CoreV1().Pods(otherNS).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.raw.CoreV1().Pods(otherNS).Patch(context.Background(), created.Name, "application/merge-patch+json",
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: runnerpod.ContainerName,
		RestartCount: 1, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled",
			FinishedAt: metav1.NewTime(e.clock.Now())}}}}}
	if _, err := e.raw.CoreV1().Pods(otherNS).UpdateStatus(t.Context(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var st poolstate.Status
	for range 2 {
		e.clock.Step(time.Minute)
		if err := q.Reconcile(t.Context(), cfg.Pool("q"), scaling.Decision{}, &st); err != nil {
			t.Fatal(err)
		}
	}
	store.mu.Lock()
	deaths := maps.Clone(store.deaths)
	store.mu.Unlock()
	if len(deaths) != 0 {
		t.Fatalf("deaths recorded %v; want none for a forged pod", deaths)
	}
	victimUntouched(t, e, name, id)
	if len(st.Foreign) != 1 {
		t.Fatalf("q's status names foreign objects %q; want the forged pod", st.Foreign)
	}
}

// TestDeletionCutShortAfterTheRetirementIsFinished: a runner is retired from
// the roster before its StatefulSet is deleted; when that deletion fails, the
// StatefulSet is still the runner's (the retired entry recorded its UID), not
// a foreign object: the next sweep deletes it, and nothing of the runner is
// left.
func TestDeletionCutShortAfterTheRetirementIsFinished(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	r := e.start(name)
	e.mustSweep(1, time.Time{})
	e.exit(name, r.ID)
	refuse := func(req *http.Request) error {
		if req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/statefulsets/") {
			return fmt.Errorf("injected: deleting a statefulset refused")
		}
		return nil
	}
	e.refuse.Store(&refuse)
	if err := e.sweep(0, time.Time{}); err == nil {
		t.Fatal("a sweep whose StatefulSet deletion was refused reported no error")
	}
	live, err := e.roster.Live(t.Context(), "p")
	if err != nil || len(live) != 0 {
		t.Fatalf("live runners %+v (%v); want the runner retired before its deletion", live, err)
	}
	e.refuse.Store(nil)
	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v left, want the retired runner's deleted", got)
	}
	if len(e.status.Foreign) != 0 {
		t.Fatalf("foreign objects %q: a retired runner's StatefulSet is still its own", e.status.Foreign)
	}
	e.waitGone(name)
}
