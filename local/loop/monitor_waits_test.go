package loop

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// queuedFor is a job of pool label's queued for d.
func queuedFor(id int64, label string, d time.Duration) githubsim.Job {
	return githubsim.Job{ID: id, State: githubsim.JobQueued, QueuedAt: time.Now().Add(-d),
		JobSpec: githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted", label}}}
}

// runnerStatefulSet creates a runner StatefulSet of pool in ns, with no pod.
func runnerStatefulSet(t *testing.T, kube kubernetes.Interface, ns, pool string) {
	t.Helper()
	runnerStatefulSetNamed(t, kube, ns, pool, pool+"-x")
}

// runnerStatefulSetNamed creates runner StatefulSet name of pool in ns, with no pod.
func runnerStatefulSetNamed(t *testing.T, kube kubernetes.Interface, ns, pool, name string) {
	t.Helper()
	labels := map[string]string{runnerpod.LabelPool: pool, runnerpod.LabelRunner: name}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: runnerpod.ContainerName, Image: "r"}}}}}}
	if _, err := kube.AppsV1().StatefulSets(ns).Create(t.Context(), sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestWaitBeyondTheBoundWithRoomIsAViolation: a job queued beyond the wait bound
// while its pool has fewer runners than its jobs need and room for more is a
// violation once the shortfall has lasted shortfallGrace and two sweeps of the
// pool that began after it ended cleanly, reported once; not before those
// sweeps, however long the shortfall (a failed sweep, or one that began before
// the shortfall, does not count); not
// while the pool's runners cover its jobs, not when a fault keeps the pool's jobs
// from running, and not while the sweeper is throttled.
func TestWaitBeyondTheBoundWithRoomIsAViolation(t *testing.T) {
	t.Parallel()
	kube, ns := testenv.Namespace(t)
	runnerStatefulSet(t, kube, ns, "keep")
	sim := githubsim.New(githubsim.Options{})
	newLoop := func() *Loop {
		l := testLoopIn(t, sim, kube, ns)
		l.opts.WaitBound = 30 * time.Second
		return l
	}
	jobs := []githubsim.Job{queuedFor(1, "small", 40*time.Second), queuedFor(2, "keep", 40*time.Second), queuedFor(3, "small", time.Second)}
	longAgo := func(l *Loop) {
		for _, p := range []string{"small", "keep"} {
			l.shortSince[p] = time.Now().Add(-shortfallGrace - time.Second)
		}
	}

	cleanTwice := func(l *Loop) {
		for range 2 {
			l.swept.record(time.Now(), sweeper.Report{Swept: []string{"small", "keep"}})
		}
	}
	l := newLoop()
	cleanTwice(l)
	l.judgeWaits(t.Context(), jobs)
	l.judgeWaits(t.Context(), jobs)
	if v := l.Monitor.Violations(); len(v) != 0 {
		t.Fatalf("a shortfall younger than the grace: violations %q", v)
	}
	longAgo(l)
	before := l.shortSince["small"].Add(-time.Second)
	l.swept.record(before, sweeper.Report{Swept: []string{"small", "keep"}})
	l.swept.record(time.Now(), sweeper.Report{Swept: []string{"keep"}, Failed: []string{"small"}})
	l.swept.record(time.Now(), sweeper.Report{Swept: []string{"small", "keep"}})
	l.judgeWaits(t.Context(), jobs)
	if v := l.Monitor.Violations(); len(v) != 0 {
		t.Fatalf("a shortfall older than the grace but only one clean sweep of the pool since: violations %q", v)
	}
	l.swept.record(time.Now(), sweeper.Report{Swept: []string{"small", "keep"}})
	for range 2 {
		l.judgeWaits(t.Context(), jobs)
	}
	v := l.Monitor.Violations()
	if len(v) != 1 {
		t.Fatalf("violations %q, want job 1 alone (job 2's pool has a runner for it, job 3 is within the bound)", v)
	}
	mustFind(t, "violations", v, "job 1 queued for 40s while pool small had 0 runners for 2 outstanding jobs (max 2) for ", "across two clean sweeps")
	if _, short := l.shortSince["keep"]; short {
		t.Fatal("pool keep, whose runner covers its job, is still counted short")
	}

	excused := newLoop()
	excused.Monitor.PoolFault("small", "image cannot be pulled")
	longAgo(excused)
	cleanTwice(excused)
	excused.judgeWaits(t.Context(), jobs)
	if v := excused.Monitor.Violations(); len(v) != 0 {
		t.Fatalf("with a fault on the pool: violations %q", v)
	}

	paused := newLoop()
	paused.pausedUntil.Store(time.Now().Add(time.Minute).UnixNano())
	longAgo(paused)
	cleanTwice(paused)
	paused.judgeWaits(t.Context(), jobs)
	if v := paused.Monitor.Violations(); len(v) != 0 || len(paused.shortSince) != 0 {
		t.Fatalf("while sweeps are paused: violations %q, short since %v; want neither", v, paused.shortSince)
	}
}

// TestLeftovers: what the pools left is listed — StatefulSets, pods (one held by
// our finalizer named so), Secrets and GitHub runners — and nothing else in the
// namespace.
func TestLeftovers(t *testing.T) {
	t.Parallel()
	kube, ns := testenv.Namespace(t)
	sim, _, take := simWithRunner(t)
	runner, _ := take("small-a")
	l := testLoopIn(t, sim, kube, ns)
	ctx := t.Context()
	runnerStatefulSet(t, kube, ns, "small")
	label := map[string]string{runnerpod.LabelPool: "small"}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "small-x", Labels: label}}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := corev1.PodSpec{SchedulerName: "runnerscaler.dev/no-scheduler", Containers: []corev1.Container{{Name: "c", Image: "r"}}}
	held := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "small-x-0", Labels: label, Finalizers: []string{runnerpod.Finalizer}}, Spec: spec}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: spec}
	for _, p := range []*corev1.Pod{held, other} {
		if _, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := kube.CoreV1().Pods(ns).Patch(context.Background(), held.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Errorf("releasing %s: %v", held.Name, err)
		}
	})
	if err := kube.CoreV1().Pods(ns).Delete(ctx, held.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := l.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("github runner small-a (id %d)", runner.ID),
		"pod Terminating with our finalizer " + ns + "/small-x-0",
		"secret " + ns + "/small-x",
		"statefulset " + ns + "/small-x",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("leftovers %q, want %q", got, want)
	}
}

// TestHookLeftovers: for the pools in container mode, the workflow pods and
// the hooks' Secrets (labelled runner-pod) in the hook namespaces and the
// claims in a kubernetes-mode pool's runner namespace are leftovers; objects
// without the label, and claims beside pools not in kubernetes mode, are not.
func TestHookLeftovers(t *testing.T) {
	t.Parallel()
	kube, runners := testenv.Namespace(t)
	_, jobs := testenv.Namespace(t)
	_, plain := testenv.Namespace(t)
	cfg, err := pool.Parse(fmt.Appendf(nil, `
pools:
  - name: cmk
    organization: acme
    labels: [cmk]
    maxReplicas: 1
    kubernetes:
      namespace: %[1]s
      serviceAccountName: cmk-runner
      image: r
      containerMode: kubernetes
      workVolumeClaim: {storageClassName: work, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  - name: cmn
    organization: acme
    labels: [cmn]
    maxReplicas: 1
    kubernetes: {namespace: %[1]s, image: r, serviceAccountName: cmn-runner, containerMode: kubernetes-novolume, jobsNamespace: %[2]s}
  - name: small
    organization: acme
    labels: [small]
    maxReplicas: 1
    kubernetes: {namespace: %[3]s, image: r}
`, runners, jobs, plain))
	if err != nil {
		t.Fatal(err)
	}
	l := testLoopIn(t, githubsim.New(githubsim.Options{}), kube, plain)
	l.pools.Store(cfg)
	ctx := t.Context()
	label := map[string]string{runnerpod.LabelHookRunnerPod: "cmk-x-0"}
	spec := corev1.PodSpec{SchedulerName: "runnerscaler.dev/no-scheduler", Containers: []corev1.Container{{Name: "job", Image: "r"}}}
	claim := func(name string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	}
	for _, ns := range []string{runners, jobs, plain} {
		for _, p := range []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "cmk-x-0-workflow", Labels: label}, Spec: spec},
			{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled"}, Spec: spec}} {
			if _, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "cmk-x-0-secret-abcdefgh", Labels: label}},
			{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled"}}} {
			if _, err := kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("cmk-x-0-work"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"the hooks' secret " + jobs + "/cmk-x-0-secret-abcdefgh",
		"the hooks' secret " + runners + "/cmk-x-0-secret-abcdefgh",
		"work claim " + runners + "/cmk-x-0-work",
		"workflow pod " + jobs + "/cmk-x-0-workflow",
		"workflow pod " + runners + "/cmk-x-0-workflow",
	}
	slices.Sort(want) // as Leftovers sorts: the namespaces' names are random
	if !slices.Equal(got, want) {
		t.Fatalf("leftovers %q, want %q", got, want)
	}
}
