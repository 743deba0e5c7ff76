package reconcile

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// TestPodClaimingARunnersStatefulSetIsNotItsPod: a pod that names a runner's
// StatefulSet as its controller under another name than the StatefulSet's
// pod — forged by someone who can create pods, with a runner container that
// finished — is not taken for the runner's pod: the runner is observed with
// its own pod, running. (On a cluster the StatefulSet controller releases
// such a pod within moments; the sweep must not act on it meanwhile.)
func TestPodClaimingARunnersStatefulSetIsNotItsPod(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte("pools:\n  - name: p\n    organization: acme\n    labels: [big]\n    maxReplicas: 2\n    kubernetes: {namespace: ns, image: runner:1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	mark := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{runnerpod.LabelPool: "p"},
			Annotations: map[string]string{runnerpod.AnnotationDeployment: "d"}}
	}
	sts := &appsv1.StatefulSet{ObjectMeta: mark("p-bcdfg")}
	sts.UID = "sts-uid"
	controller := true
	owned := func(name string, state corev1.ContainerState) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: mark(name), Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: runnerpod.ContainerName, State: state}}}}
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: &controller}}
		return pod
	}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	real := owned("p-bcdfg-0", corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-time.Minute))}})
	forged := owned("p-bcdfg-zz", corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
		FinishedAt: metav1.NewTime(now)}})
	ros := &memRoster{live: []roster.Runner{{Pool: "p", Name: "p-bcdfg-0", Namespace: "ns", StatefulSetUID: "sts-uid"}}}
	r := &Reconciler{kube: fake.NewClientset(sts, real, forged), opts: Options{Deployment: "d", RegistrationTimeout: 10 * time.Minute, Roster: ros}}
	s := &sweep{p: cfg.Pool("p"), now: now, log: r.logger()}
	if err := r.observe(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if len(s.runners) != 1 || s.runners[0].pod == nil || s.runners[0].pod.Name != real.Name {
		t.Fatalf("runners %+v, want p-bcdfg with its own pod %s", s.runners, real.Name)
	}
}

// TestPodReleasedByItsStatefulSetIsStillItsRunners: while a runner's
// StatefulSet is being deleted with --cascade=orphan, the garbage collector
// removes the owner reference from its pod a moment before the StatefulSet
// goes. A sweep then sees the StatefulSet without a controlled pod; the pod
// whose UID the roster recorded is still the runner's, not "no pod" (which
// cannot hold a job, and is removed on GitHub's busy flag alone), nor an orphan.
func TestPodReleasedByItsStatefulSetIsStillItsRunners(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte("pools:\n  - name: p\n    organization: acme\n    labels: [big]\n    maxReplicas: 2\n    kubernetes: {namespace: ns, image: runner:1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{runnerpod.LabelPool: "p"},
			Annotations: map[string]string{runnerpod.AnnotationDeployment: "d"}}
	}
	sts := &appsv1.StatefulSet{ObjectMeta: meta("p-bcdfg")}
	sts.UID, sts.DeletionTimestamp, sts.Finalizers = "sts-uid", &metav1.Time{Time: now}, []string{"orphan"}
	pod := &corev1.Pod{ObjectMeta: meta("p-bcdfg-0"), Status: corev1.PodStatus{Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{{Name: runnerpod.ContainerName, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-time.Minute))}}}}}}
	pod.UID, pod.Finalizers, pod.Spec.NodeName = "pod-uid", []string{runnerpod.Finalizer}, "node"
	ros := &memRoster{live: []roster.Runner{{Pool: "p", Name: "p-bcdfg-0", Namespace: "ns", StatefulSetUID: "sts-uid", PodUIDs: []string{"pod-uid"}}}}
	r := &Reconciler{kube: fake.NewClientset(sts, pod), opts: Options{Deployment: "d", RegistrationTimeout: 10 * time.Minute, Roster: ros}}
	s := &sweep{p: cfg.Pool("p"), now: now, log: r.logger()}
	if err := r.observe(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if len(s.runners) != 1 || s.runners[0].pod == nil || s.runners[0].pod.UID != "pod-uid" || len(s.orphans) != 0 {
		t.Fatalf("runners %+v, orphans %d; want p-bcdfg with its released pod, and no orphan", s.runners, len(s.orphans))
	}
	if !mayHoldJob(s.runners[0].pod, true) {
		t.Fatal("the runner of a running pod was taken for one that cannot hold a job")
	}
}

// TestPodReleasedBeforeItWasRecordedIsStillItsRunners: a runner's
// StatefulSet deleted with --cascade=orphan right after its pod started,
// before any sweep saw the pod: the pod of the runner's own name, which no
// controller claims, is its runner's — attached while the StatefulSet is
// still listed, its orphan once it is gone (and its UID recorded then) — not
// a foreign object, whose runner's ownerless Secret cleanup would release
// under the pod's job.
func TestPodReleasedBeforeItWasRecordedIsStillItsRunners(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte("pools:\n  - name: p\n    organization: acme\n    labels: [big]\n    maxReplicas: 2\n    kubernetes: {namespace: ns, image: runner:1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{runnerpod.LabelPool: "p"},
			Annotations: map[string]string{runnerpod.AnnotationDeployment: "d"}}
	}
	pod := &corev1.Pod{ObjectMeta: meta("p-bcdfg-0"), Status: corev1.PodStatus{Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{{Name: runnerpod.ContainerName, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-time.Minute))}}}}}}
	pod.UID, pod.Finalizers, pod.Spec.NodeName = "pod-uid", []string{runnerpod.Finalizer}, "node"
	for _, stsListed := range []bool{true, false} {
		objects := []runtime.Object{pod.DeepCopy()}
		if stsListed {
			sts := &appsv1.StatefulSet{ObjectMeta: meta("p-bcdfg")}
			sts.UID = "sts-uid"
			objects = append(objects, sts)
		}
		ros := &memRoster{live: []roster.Runner{{Pool: "p", Name: "p-bcdfg-0", Namespace: "ns", StatefulSetUID: "sts-uid"}}}
		r := &Reconciler{kube: fake.NewClientset(objects...), opts: Options{Deployment: "d", RegistrationTimeout: 10 * time.Minute, Roster: ros}}
		s := &sweep{p: cfg.Pool("p"), now: now, log: r.logger()}
		if err := r.observe(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		switch {
		case stsListed && (len(s.runners) != 1 || s.runners[0].pod == nil || len(s.orphans) != 0):
			t.Fatalf("StatefulSet listed: runners %+v, orphans %d; want the runner with its released pod", s.runners, len(s.orphans))
		case !stsListed && (len(s.orphans) != 1 || s.orphans[0].id.Name != "p-bcdfg-0" || len(s.foreign) != 0):
			t.Fatalf("StatefulSet gone: orphans %+v, foreign %q; want the pod as its runner's orphan", s.orphans, s.foreign)
		}
		if live, _ := ros.Live(t.Context(), "p"); !live[0].HasPod("pod-uid") {
			t.Fatalf("stsListed %v: the pod's UID was not recorded: %+v", stsListed, live[0])
		}
	}
}
