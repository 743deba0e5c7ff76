package reconcile_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

const (
	removeCall = "DELETE /orgs/{org}/actions/runners/{runner_id}"
	listCall   = "GET /orgs/{org}/actions/runners"
)

// TestRestartedEphemeralRunnerIsReleasedByGitHubFirst: a runner container that
// exited 0 and was restarted by the kubelet (restartPolicy Always) may be running
// a job; container state decides when the sweeper asks GitHub, never whether. The
// runner is deleted only after RemoveRunner answered 204 or 404, a busy answer is
// not asked again on every sweep, and a crash-looping finished runner is still
// recognised and replaced.
func TestRestartedEphemeralRunnerIsReleasedByGitHubFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	t0 := e.clock.Now()
	e.mustSweep(1, t0)
	name := e.statefulSets()[0]
	id := e.start(name).ID
	e.mustSweep(1, t0)
	if err := e.sim.SetBusy(id, true); err != nil { // the restarted container took a job
		t.Fatal(err)
	}
	// Its job probe has not reported the job yet: GitHub's answer decides.
	e.setRunnerStatus(name, corev1.ContainerStatus{RestartCount: 1,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}})
	// GitHub is asked by its runner list (busy: no RemoveRunner) or by RemoveRunner (422).
	asks := func() int { c := e.sim.Calls(); return c[removeCall] + c[listCall] }
	before := asks()
	e.mustSweep(1, t0)
	if !slices.Contains(e.statefulSets(), name) {
		t.Fatal("the runner was deleted while GitHub lists it busy")
	}
	if got := asks() - before; got != 1 {
		t.Fatalf("GitHub asked %d times, want once", got)
	}
	for range 5 {
		e.clock.Step(2 * time.Second)
		e.mustSweep(1, t0)
	}
	if got := asks() - before; got != 1 {
		t.Fatalf("GitHub asked %d times within the busy back-off, want once", got)
	}
	if !slices.Contains(e.statefulSets(), name) {
		t.Fatal("the runner was deleted while GitHub lists it busy")
	}

	// The job ends: GitHub removes the ephemeral runner; the container exits and,
	// finding its marker, keeps exiting: CrashLoopBackOff.
	if err := e.sim.FinishJob(id); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(time.Second)
	e.setRunnerStatus(name, corev1.ContainerStatus{RestartCount: 4,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
			FinishedAt: metav1.NewTime(e.clock.Now())}}})
	e.mustSweep(1, t0)
	got := e.statefulSets()
	if slices.Contains(got, name) || len(got) != 1 {
		t.Fatalf("statefulsets %v: want the finished runner deleted (404) and replaced", got)
	}
	e.waitGone(name)
}

// TestTokenRunnerIsNotConcludedUnregisteredEarly: a token-mode runner GitHub does
// not list yet may be registering right now; it is concluded "never registered"
// only after the registration timeout, or when its pod never ran.
func TestTokenRunnerIsNotConcludedUnregisteredEarly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.mustSweep(2, time.Time{})
	names := e.statefulSets()
	starting, late := names[0], names[1]
	e.run(starting)
	e.run(late)
	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 2 {
		t.Fatalf("statefulsets %v: started runners not yet listed by GitHub must wait", got)
	}
	reg := e.register(starting) // it registers just after the list
	e.clock.Step(time.Minute)
	e.mustSweep(0, time.Time{})
	if slices.Contains(e.statefulSets(), starting) {
		t.Fatal("the runner that registered was not removed")
	}
	if _, ok := e.sim.Runner(reg.ID); ok {
		t.Fatal("the runner that registered was deleted without being unregistered: its registration leaks")
	}
	if !slices.Contains(e.statefulSets(), late) {
		t.Fatal("the runner that has not registered was deleted before the registration timeout")
	}
	e.clock.Step(10 * time.Minute)
	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v: after the registration timeout the unregistered runner goes", got)
	}

	// A pod that never ran (not bound, no container status) goes at once.
	e.mustSweep(1, time.Time{})
	e.pods()
	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v: a runner whose pod never ran has nothing to unregister", got)
	}
}

// TestUnregisteredRunnerWhosePodEndedGoesAtOnce: a token-mode runner GitHub
// does not list, whose pod is being deleted and whose container has ended (a
// pod the StatefulSet controller re-created after its Secret was deleted never
// starts), can no longer register: it goes without waiting out the
// registration timeout (60-job chaos: such a pod held its slot 10 minutes).
// While its container runs it may still register, and it waits.
func TestUnregisteredRunnerWhosePodEndedGoesAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.run(name)
	if err := e.raw.CoreV1().Pods(e.ns).Delete(t.Context(), name+"-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.sweep(0, time.Time{}); err != nil { // the container keeps running (no endStoppedRunners)
		t.Fatal(err)
	}
	if got := e.statefulSets(); len(got) != 1 {
		t.Fatalf("statefulsets %v: a deleting pod whose runner container runs may still register; want it kept", got)
	}
	pod, err := e.raw.CoreV1().Pods(e.ns).Get(t.Context(), name+"-0", metav1.GetOptions{})
	if err != nil || pod.DeletionTimestamp == nil {
		t.Fatalf("pod %s: %v, want it kept, being deleted, by the finalizer", name, err)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "runner", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown", FinishedAt: metav1.NewTime(e.clock.Now())}}}}
	if _, err := e.raw.CoreV1().Pods(e.ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v: a runner that can no longer register is kept until the registration timeout", got)
	}
}

// TestStatefulSetWithoutPodReleasesItsRegistration: admission or a quota refuses
// the pod; the JIT registration made for it is released when the runner goes.
func TestStatefulSetWithoutPodReleasesItsRegistration(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.denyPods()
	t0 := e.clock.Now()
	e.mustSweep(1, t0)
	name := e.statefulSets()[0]
	id := e.jitID(name)
	if _, ok := e.sim.Runner(id); !ok {
		t.Fatalf("JIT runner %d not registered on GitHub", id)
	}
	e.waitEvent(name, "FailedCreate")
	e.mustSweep(0, t0)
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v, want none", got)
	}
	if _, ok := e.sim.Runner(id); ok {
		t.Fatal("the JIT registration of a runner whose pod never existed leaked")
	}
}

// TestRunnersThatNeverStartAreReplacedWithAReason: a runner whose pod cannot be
// created, or whose image cannot be pulled, holds its slot only until the
// registration timeout, and the pool status says why.
func TestRunnersThatNeverStartAreReplacedWithAReason(t *testing.T) {
	t.Parallel()
	t.Run("no pod", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, true)
		e.denyPods()
		t0 := e.clock.Now()
		e.mustSweep(1, t0)
		name := e.statefulSets()[0]
		id := e.jitID(name)
		e.waitEvent(name, "FailedCreate")
		e.clock.Step(11 * time.Minute)
		e.mustSweep(1, e.clock.Now())
		got := e.statefulSets()
		if slices.Contains(got, name) || len(got) != 1 {
			t.Fatalf("statefulsets %v: want %s replaced", got, name)
		}
		if _, ok := e.sim.Runner(id); ok {
			t.Fatal("the replaced runner's JIT registration leaked")
		}
		if r := e.status.Stuck[name]; !strings.Contains(r, "FailedCreate") || !strings.Contains(r, "quota") {
			t.Fatalf("stuck %v: want the controller's reason for %s", e.status.Stuck, name)
		}
	})
	t.Run("image cannot be pulled", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, true)
		t0 := e.clock.Now()
		e.mustSweep(1, t0)
		name := e.statefulSets()[0]
		e.setRunnerStatus(name, corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ImagePullBackOff", Message: `Back-off pulling image "runner:1"`}}})
		e.mustSweep(1, t0)
		if r := e.status.Stuck[name]; !strings.Contains(r, "ImagePullBackOff") {
			t.Fatalf("stuck %v: want the pull failure of %s", e.status.Stuck, name)
		}
		if got := e.statefulSets(); !slices.Equal(got, []string{name}) {
			t.Fatalf("statefulsets %v: replaced before the registration timeout", got)
		}
		e.clock.Step(11 * time.Minute)
		e.mustSweep(1, e.clock.Now())
		if got := e.statefulSets(); slices.Contains(got, name) || len(got) != 1 {
			t.Fatalf("statefulsets %v: want %s replaced after the registration timeout", got, name)
		}
	})
}

// TestMaxReplicasIsACeiling: busy runners marked when their reservations expired
// keep their slots; new demand does not create replacements beside them.
func TestMaxReplicasIsACeiling(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	t0 := e.clock.Now()
	e.mustSweep(10, t0)
	ids := map[string]int64{}
	for _, n := range e.statefulSets() {
		ids[n] = e.start(n).ID
		if err := e.sim.SetBusy(ids[n], true); err != nil {
			t.Fatal(err)
		}
	}
	e.mustSweep(10, t0)
	e.clock.Step(time.Minute)
	e.mustSweep(7, t0) // three long jobs' reservations expired: three busy runners marked
	e.mustSweep(10, t0)
	if n := len(e.statefulSets()); n > 10 {
		t.Fatalf("%d statefulsets under maxReplicas 10", n)
	}
	var marked []string
	for n, p := range e.pods() {
		if p.Annotations[runnerpod.AnnotationUnregistrationRequest] != "" {
			marked = append(marked, n)
		}
	}
	if len(marked) != 3 {
		t.Fatalf("marked %v, want 3", marked)
	}
	for _, n := range marked {
		e.exit(n, ids[n])
	}
	e.clock.Step(time.Minute)
	e.mustSweep(10, e.clock.Now())
	got := e.statefulSets()
	if len(got) != 10 || slices.ContainsFunc(marked, func(n string) bool { return slices.Contains(got, n) }) {
		t.Fatalf("statefulsets %v: want the 3 finished ones replaced, 10 in all", got)
	}
}

// TestUnregisteredPersistentRunnerGetsAFreshToken: the token in a persistent
// runner's Secret may have had minutes left at creation; until the runner
// registers, a container that restarts must find a valid one.
func TestUnregisteredPersistentRunnerGetsAFreshToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *githubsim.Options) { o.RegistrationTokenLifetime = 8 * time.Minute })
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.run(name) // config.sh keeps failing (say, the network); the container restarts
	e.clock.Step(4 * time.Minute)
	e.mustSweep(1, time.Time{})
	e.clock.Step(5 * time.Minute) // the token made at creation has expired
	e.register(name)              // fails the test if the Secret's token is not valid
}

// setRunnerStatus replaces the runner container's status (the pod stays Running).
func (e *env) setRunnerStatus(name string, cs corev1.ContainerStatus) {
	e.t.Helper()
	pod := e.pods()[name]
	cs.Name = runnerpod.ContainerName
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	if pod.Status.Phase == "" {
		pod.Status.Phase = corev1.PodPending
	}
	if _, err := e.kube.CoreV1().Pods(e.ns).UpdateStatus(e.t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// denyPods makes the namespace refuse every pod (a quota of zero pods).
func (e *env) denyPods() {
	e.t.Helper()
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	q, err := e.kube.CoreV1().ResourceQuotas(e.ns).Create(e.t.Context(), q, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	// The stack runs no resource-quota controller: write the status it would.
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if _, err := e.kube.CoreV1().ResourceQuotas(e.ns).UpdateStatus(e.t.Context(), q, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) jitID(name string) int64 {
	e.t.Helper()
	sts, err := e.kube.AppsV1().StatefulSets(e.ns).Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	id, err := strconv.ParseInt(sts.Annotations[runnerpod.AnnotationRunnerID], 10, 64)
	if err != nil {
		e.t.Fatalf("statefulset %s has no runner id: %v", name, err)
	}
	return id
}

// waitEvent waits for the StatefulSet controller's event with reason about name.
func (e *env) waitEvent(name, reason string) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.t.Context(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := e.kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil // the client's rate limiter under parallel tests: poll again
		}
		return slices.ContainsFunc(list.Items, func(ev corev1.Event) bool {
			return ev.InvolvedObject.Name == name && ev.Reason == reason
		}), nil
	})
	if err != nil {
		e.t.Fatalf("no %s event for %s: %v", reason, name, err)
	}
}

// TestPodBoundWhileStoppingIsNotConcludedUnstarted: a token-mode runner whose pod
// was unbound when the sweep listed it is "never ran" only if it is still unbound
// when the sweeper acts. Here the scheduler binds it in between — before the stop
// is recorded, or just before the sweeper deletes — and its runner then registers
// and takes a job: it is not deleted under the job, and its registration is
// released before it goes.
func TestPodBoundWhileStoppingIsNotConcludedUnstarted(t *testing.T) {
	cases := map[string]func(*http.Request, string) bool{
		"bound before the stop is recorded": func(req *http.Request, pod string) bool {
			return req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/pods/"+pod)
		},
		"bound before the sweeper deletes": func(req *http.Request, _ string) bool {
			return req.Method == http.MethodDelete
		},
	}
	for name, when := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			e.mustSweep(1, time.Time{})
			runner := e.statefulSets()[0]
			pod := runner + "-0"
			e.pods()
			var bound atomic.Bool
			e.useClient(func(req *http.Request) {
				if when(req, pod) && !bound.Swap(true) {
					e.bind(pod, "ghost-node") // the scheduler, between the sweep's list and its write
				}
			})
			e.mustSweep(0, time.Time{})
			if !bound.Load() {
				t.Fatal("the sweep made no write the race needs: the test proves nothing")
			}
			if !slices.Contains(e.statefulSets(), runner) {
				t.Fatal("a runner whose pod was bound before the sweeper acted was deleted as never started")
			}
			e.run(runner)
			reg := e.register(runner)
			if err := e.sim.SetBusy(reg.ID, true); err != nil {
				t.Fatal(err)
			}
			e.clock.Step(time.Minute)
			e.mustSweep(0, time.Time{})
			if !slices.Contains(e.statefulSets(), runner) {
				t.Fatal("a runner running a job was deleted")
			}
			if err := e.sim.SetBusy(reg.ID, false); err != nil {
				t.Fatal(err)
			}
			e.clock.Step(10 * time.Minute)
			e.mustSweep(0, time.Time{})
			if got := e.statefulSets(); len(got) != 0 {
				t.Fatalf("statefulsets %v: the idle runner should be gone", got)
			}
			if _, ok := e.sim.Runner(reg.ID); ok {
				t.Fatal("the runner was deleted without being unregistered: its registration leaks")
			}
		})
	}
}

// bind plays the scheduler: pod is bound to node.
func (e *env) bind(pod, node string) {
	e.t.Helper()
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := e.kube.CoreV1().Pods(e.ns).Bind(context.Background(), b, metav1.CreateOptions{}); err != nil {
		e.t.Errorf("binding %s: %v", pod, err)
	}
}

// TestStopKilledAfterRemoveRunnerResumes: a token-mode runner GitHub lists
// offline (its container restarting) was never annotated with its id, so the
// stop finds the id by name; GitHub releases it, and the sweep dies before
// recording completion. The next sweep, no longer finding the runner by name,
// still knows its id (404: released) and deletes it instead of waiting out the
// registration timeout.
func TestStopKilledAfterRemoveRunnerResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.mustSweep(1, time.Time{})
	runner := e.statefulSets()[0]
	e.run(runner)
	reg := e.register(runner)
	if err := e.sim.SetOnline(reg.ID, false); err != nil {
		t.Fatal(err)
	}
	e.useFailingClient(func(req *http.Request) error {
		if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/pods/"+runner+"-0") &&
			strings.Contains(body(req), runnerpod.AnnotationUnregistrationComplete) {
			return errors.New("injected: the sweep dies before recording completion")
		}
		return nil
	})
	if err := e.sweep(0, time.Time{}); err != nil { // its pod deleted to stop it
		t.Fatal(err)
	}
	e.endStoppedRunners()
	if err := e.sweep(0, time.Time{}); err == nil {
		t.Fatal("the injected failure did not fail the sweep: the test proves nothing")
	}
	if _, ok := e.sim.Runner(reg.ID); ok {
		t.Fatal("the first sweep should have released the runner")
	}
	e.useClient(func(*http.Request) {})
	e.clock.Step(time.Minute)
	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v: the released runner waits for the registration timeout", got)
	}
}
