package tests

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestForgedRunnerObjectsMoveNothing: someone who can write objects in
// the runner namespace puts the pool label on a Secret, a StatefulSet and a pod,
// with annotations naming a scope and runner ids of runners this deployment did
// not make — in an organization its App is installed on but no pool of the file
// serves, and in the scope of the file's pool. Scheduled sweeps then call
// nothing on GitHub, leave every runner registered, and change or delete none of
// those objects: they do not record this deployment, or they name a scope it
// does not serve.
func TestForgedRunnerObjectsMoveNothing(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	s := d.sweeper(d.pools("a")) // org-a only; the App is installed on org-b too
	victimB := d.foreign("organization/org-b", "team-b-1")
	victimA := d.foreign("organization/org-a", "other-deployment-1")
	hourAgo := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	record := func(sc string, id int64, deployment string) map[string]string {
		a := map[string]string{runnerpod.AnnotationScope: sc, runnerpod.AnnotationEphemeral: "true",
			runnerpod.AnnotationRunnerID: strconv.FormatInt(id, 10), runnerpod.AnnotationJITRunnerID: strconv.FormatInt(id, 10),
			runnerpod.AnnotationSyncTime: hourAgo}
		if deployment != "" {
			a[runnerpod.AnnotationDeployment] = deployment
		}
		return a
	}
	forged := []forgery{
		// A removed pool "ghost" in org-b, without a deployment and with this one's.
		d.forgeSecret("ghost", "ghost-bcdfg", record("organization/org-b", victimB.ID, "")),
		d.forgeStatefulSet("ghost", "ghost-hjklm", record("organization/org-b", victimB.ID, d.table)),
		d.forgePod("ghost", "ghost-npqrs", record("organization/org-b", victimB.ID, d.table)),
		// Pool a's label, recording no deployment: a leftover Secret and a runner.
		d.forgeSecret("a", "a-tvwxz", record("organization/org-a", victimA.ID, "")),
		d.forgeStatefulSet("a", "a-bcdfh", record("organization/org-a", victimA.ID, "")),
	}

	before := d.sim.Calls()
	var errs []error
	for range 2 {
		_, err := s.Handle(t.Context(), sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"})
		errs = append(errs, err)
	}
	if diff := callsSince(before, d.sim.Calls()); len(diff) != 0 {
		t.Errorf("the sweeps called GitHub: %v, want no call", diff)
	}
	for _, v := range []githubsim.Runner{victimA, victimB} {
		if _, ok := d.sim.Runner(v.ID); !ok {
			t.Errorf("runner %s (%s) was removed from GitHub", v.Name, v.Scope)
		}
	}
	for _, f := range forged {
		if now, err := f.current(); err != nil || now != f.written {
			t.Errorf("%s: %s (error %v), want it as written: %s", f.what, now, err, f.written)
		}
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("scheduled sweep %d: %v", i, err)
		}
	}
}

// callsSince returns the endpoints whose call counts grew, and by how much.
func callsSince(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range after {
		if n > before[k] {
			out[k] = n - before[k]
		}
	}
	return out
}

// foreign registers an idle runner this deployment did not make, in scope sc,
// with custom labels besides GitHub's default ones.
func (d *deployment) foreign(sc, name string, labels ...string) githubsim.Runner {
	d.t.Helper()
	s, err := scope.Parse(sc)
	if err != nil {
		d.t.Fatal(err)
	}
	tok, err := d.gh.RegistrationToken(d.t.Context(), s)
	if err != nil {
		d.t.Fatal(err)
	}
	r, err := d.sim.Register(githubsim.Registration{Token: tok.Token, Scope: sc, Name: name, Labels: labels, Ephemeral: true})
	if err != nil {
		d.t.Fatal(err)
	}
	return r
}

// forgery is an object written by someone else: what the sweeper could change
// of it (its metadata but the resource version and managed fields, which the
// StatefulSet controller's status writes change too; a Secret's data), as
// written and now.
type forgery struct {
	what    string
	written string
	current func() (string, error)
}

func metaState(m metav1.ObjectMeta, extra any) string {
	b, _ := json.Marshal(map[string]any{"annotations": m.Annotations, "labels": m.Labels, "finalizers": m.Finalizers,
		"owners": m.OwnerReferences, "deleting": m.DeletionTimestamp != nil, "uid": m.UID, "extra": extra})
	return string(b)
}

func (d *deployment) forgeMeta(pool, name string, annotations map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: d.ns, Annotations: maps.Clone(annotations),
		Labels: map[string]string{runnerpod.LabelPool: pool, runnerpod.LabelRunner: name}}
}

func (d *deployment) forgeSecret(pool, name string, annotations map[string]string) forgery {
	d.t.Helper()
	secrets := d.kube.CoreV1().Secrets(d.ns)
	sec, err := secrets.Create(d.t.Context(), &corev1.Secret{ObjectMeta: d.forgeMeta(pool, name, annotations)}, metav1.CreateOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	return forgery{what: "secret " + name, written: metaState(sec.ObjectMeta, sec.Data), current: func() (string, error) {
		o, err := secrets.Get(d.t.Context(), name, metav1.GetOptions{})
		return metaState(o.ObjectMeta, o.Data), err
	}}
}

// forgeStatefulSet writes a StatefulSet of no replicas: no pod of it runs.
func (d *deployment) forgeStatefulSet(pool, name string, annotations map[string]string) forgery {
	d.t.Helper()
	meta := d.forgeMeta(pool, name, annotations)
	sts := &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](0),
		Selector: &metav1.LabelSelector{MatchLabels: meta.Labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: meta.Labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: runnerpod.ContainerName, Image: "runner:1"}}}},
	}}
	stss := d.kube.AppsV1().StatefulSets(d.ns)
	sts, err := stss.Create(d.t.Context(), sts, metav1.CreateOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	return forgery{what: "statefulset " + name, written: metaState(sts.ObjectMeta, sts.Spec), current: func() (string, error) {
		o, err := stss.Get(d.t.Context(), name, metav1.GetOptions{})
		return metaState(o.ObjectMeta, o.Spec), err
	}}
}

// forgePod writes a pod that carries the sweeper's finalizer and no owner, as an
// orphaned runner pod would; no scheduler places it.
func (d *deployment) forgePod(pool, name string, annotations map[string]string) forgery {
	d.t.Helper()
	meta := d.forgeMeta(pool, name, annotations)
	meta.Name = runnerpod.PodName(name)
	meta.Finalizers = []string{runnerpod.Finalizer}
	pod := &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{SchedulerName: "runnerscaler.dev/no-scheduler",
		Containers: []corev1.Container{{Name: runnerpod.ContainerName, Image: "runner:1"}}}}
	pods := d.kube.CoreV1().Pods(d.ns)
	pod, err := pods.Create(d.t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	return forgery{what: "pod " + pod.Name, written: metaState(pod.ObjectMeta, nil), current: func() (string, error) {
		o, err := pods.Get(d.t.Context(), pod.Name, metav1.GetOptions{})
		return metaState(o.ObjectMeta, nil), err
	}}
}

// TestForgedPodsBesideABusyRunnerTouchNoRunner, on the local stack: pool a's
// runner (the victim) runs a job, which GitHub's REST busy flag does not show
// yet, as for a while after any job's start (docs/concepts.md, "Busy is
// decided from several signals"): nothing but the sweeper's ownership check stands
// between a forged pod and the victim's removal. Another team's runner, with
// custom labels, is registered in the same organization. Someone who can
// create pods in the runner namespace then writes two pods with this
// deployment's marks and finalizer and no owner:
//   - one that never schedules, whose runner label names the victim and which
//     records the victim's id (item 1a: taken for the victim's orphan that
//     never ran, it had the victim removed on GitHub and its Secret deleted);
//   - one whose idle runner container runs, recording the foreign runner's id
//     (item 1b: its stop withdrew that runner's labels).
//
// Neither pod is one the sweeper recorded for a runner: the scheduled sweeps
// leave both alone as foreign objects (their finalizer is their creator's to
// remove), with no GitHub call about the victim or the foreign runner: the
// victim keeps its registration, its Secret and its job, which ends in
// success, and the foreign runner its registration and labels.
func TestForgedPodsBesideABusyRunnerTouchNoRunner(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	s := d.sweeper(d.pools("a"))
	if err := d.sim.SetBusyLie(&githubsim.BusyLie{MinLag: time.Hour, MaxLag: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	// The victim: the runner the sweeper makes for a queued job, running it.
	queued := d.sim.QueueJob(githubsim.JobSpec{Repository: "org-a/app", Organization: "org-a",
		Labels: []string{"self-hosted"}, Duration: time.Hour})
	d.deliver("a", queued, reservation.Queued)
	d.tick(s)
	made := d.runners()["a"]
	if len(made) != 1 {
		t.Fatalf("runners of pool a %v, want one for the queued job", made)
	}
	victimName := made[0]
	victim := d.start(victimName, "organization/org-a")
	job, ok, err := d.sim.AcquireJob(victim.ID)
	if err != nil || !ok || job.ID != queued.ID {
		t.Fatalf("runner %s took job %d (taken %v, error %v), want job %d", victim.Name, job.ID, ok, err, queued.ID)
	}
	d.deliver("a", job, reservation.InProgress)
	d.tick(s)
	if busy, _ := d.sim.RESTBusy(victim.ID); busy {
		t.Fatal("REST lists the victim busy: GitHub would refuse its removal whatever the sweeper asked")
	}
	secrets, stss := d.kube.CoreV1().Secrets(d.ns), d.kube.AppsV1().StatefulSets(d.ns)
	secret, err := secrets.Get(ctx, victimName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the victim's Secret: %v", err)
	}
	sts, err := stss.Get(ctx, victimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	foreign := d.foreign("organization/org-a", "team-b-gpu-1", "gpu", "team-b")

	// The forgeries, with every label and annotation of the victim's pod.
	pods := d.kube.CoreV1().Pods(d.ns)
	victimPod, err := pods.Get(ctx, runnerpod.PodName(victimName), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pending := d.forgeOrphanPod(victimPod, "a-frgdp-0", victimName, victim.ID, corev1.PodSpec{
		NodeSelector: map[string]string{"runnerscaler.dev/no-such-node": "true"},
		Containers:   []corev1.Container{{Name: runnerpod.ContainerName, Image: "runner:1"}}})
	// Nothing schedules the running one: the test plays its kubelet (runningIdle, endDeleted).
	running := d.forgeOrphanPod(victimPod, "a-frgdr-0", runnername.FromPod("a-frgdr-0"), foreign.ID, corev1.PodSpec{
		SchedulerName: "runnerscaler.dev/no-scheduler",
		Containers:    []corev1.Container{{Name: runnerpod.ContainerName, Image: "runner:1", ReadinessProbe: runnerpod.JobProbe()}}})
	d.runningIdle(running)

	// Sweeps as many as finished such orphans before: the forged pods are left alone.
	const sweeps = 6
	for i := range sweeps {
		if r := d.tick(s); !slices.Contains(r.Swept, "a") {
			t.Fatalf("sweep %d swept %v, want pool a", i+1, r.Swept)
		}
		d.endDeleted(running.Name)
	}
	for _, forged := range []*corev1.Pod{pending, running} {
		now, err := pods.Get(ctx, forged.Name, metav1.GetOptions{})
		if err != nil || now.DeletionTimestamp != nil || !slices.Contains(now.Finalizers, runnerpod.Finalizer) {
			t.Errorf("forged pod %s after %d sweeps: %v (deleting %v); want it left alone as a foreign object", forged.Name, sweeps, err,
				err == nil && now.DeletionTimestamp != nil)
		}
	}

	for _, x := range d.exchanges() {
		if id, ok := runnerIDOf(x.Path); ok && (id == victim.ID || id == foreign.ID) {
			t.Errorf("GitHub call about runner %d (victim %d, foreign %d): %s %s → %d", id, victim.ID, foreign.ID, x.Method, x.Path, x.Status)
		}
	}
	if _, ok := d.sim.Runner(victim.ID); !ok {
		t.Errorf("the victim %s was removed from GitHub", victim.Name)
	}
	if got, ok := d.sim.Runner(foreign.ID); !ok || !slices.Equal(got.Labels, foreign.Labels) {
		t.Errorf("the foreign runner on GitHub: registered %v, labels %v, want registered with %v", ok, got.Labels, foreign.Labels)
	}
	nowSecret, err := secrets.Get(ctx, victimName, metav1.GetOptions{})
	kept(t, "the victim's Secret", secret.ObjectMeta, nowSecret.ObjectMeta, err)
	nowSts, err := stss.Get(ctx, victimName, metav1.GetOptions{})
	kept(t, "the victim's StatefulSet", sts.ObjectMeta, nowSts.ObjectMeta, err)
	nowPod, err := pods.Get(ctx, victimPod.Name, metav1.GetOptions{})
	kept(t, "the victim's pod", victimPod.ObjectMeta, nowPod.ObjectMeta, err)

	// The victim's job runs on to its end.
	if err := d.sim.CompleteJobAs(job.ID, githubsim.JobSuccess); err != nil {
		t.Errorf("completing the victim's job: %v", err)
	}
	for _, j := range d.sim.Jobs() {
		if j.ID == job.ID && (j.Conclusion != githubsim.JobSuccess || j.RunnerID != victim.ID || j.LostRunner) {
			t.Errorf("job %d ended %s on runner %d (runner removed under it: %v; %s), want success on the victim %d",
				j.ID, j.Conclusion, j.RunnerID, j.LostRunner, j.FailureReason, victim.ID)
		}
	}
}

// kept fails the test unless an object read again (now, err) is the one read
// before (was), not being deleted.
func kept(t *testing.T, what string, was, now metav1.ObjectMeta, err error) {
	t.Helper()
	switch {
	case err != nil:
		t.Errorf("%s: %v, want it kept", what, err)
	case now.UID != was.UID || now.DeletionTimestamp != nil:
		t.Errorf("%s: UID %s (being deleted: %v), want %s kept", what, now.UID, now.DeletionTimestamp != nil, was.UID)
	}
}

// deliver records the webhook's delivery of job in state for pool.
func (d *deployment) deliver(pool string, j githubsim.Job, state reservation.State) {
	d.t.Helper()
	_, err := d.rs.Record(d.t.Context(), reservation.Delivery{Pool: pool, JobID: j.ID, RunID: j.RunID, Repository: j.Repository,
		State: state, Amount: 1, Duration: 10 * time.Minute, RunnerID: j.RunnerID, RunnerName: j.RunnerName})
	if err != nil {
		d.t.Fatal(err)
	}
}

// forgeOrphanPod writes pod name with spec and the marks of the runner pod
// real (its labels and annotations: this deployment's, its pool's, its
// scope's), our finalizer and no owner; its runner label names runner, and it
// records runner id id.
func (d *deployment) forgeOrphanPod(real *corev1.Pod, name, runner string, id int64, spec corev1.PodSpec) *corev1.Pod {
	d.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.ns, Labels: maps.Clone(real.Labels),
		Annotations: maps.Clone(real.Annotations), Finalizers: []string{runnerpod.Finalizer}}, Spec: spec}
	pod.Labels[runnerpod.LabelRunner] = runner
	pod.Annotations[runnerpod.AnnotationRunnerID] = strconv.FormatInt(id, 10)
	pod.Annotations[runnerpod.AnnotationJITRunnerID] = strconv.FormatInt(id, 10)
	pod, err := d.kube.CoreV1().Pods(d.ns).Create(d.t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	return pod
}

// runningIdle plays the kubelet of pod: its runner container has run for a
// minute without reporting a job (not ready).
func (d *deployment) runningIdle(pod *corev1.Pod) {
	d.t.Helper()
	started := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: started}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: runnerpod.ContainerName, Image: "runner:1",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}}
	if _, err := d.kube.CoreV1().Pods(d.ns).UpdateStatus(d.t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		d.t.Fatal(err)
	}
}

// endDeleted plays the kubelet of pod name once it is being deleted: its
// runner container ends, as the runner's does on SIGTERM.
func (d *deployment) endDeleted(name string) {
	d.t.Helper()
	pods := d.kube.CoreV1().Pods(d.ns)
	pod, err := pods.Get(d.t.Context(), name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return
	case err != nil:
		d.t.Fatal(err)
	}
	cs := runnerpod.RunnerStatus(pod)
	if pod.DeletionTimestamp == nil || cs == nil || cs.State.Running == nil {
		return
	}
	cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, Reason: "Completed", StartedAt: cs.State.Running.StartedAt, FinishedAt: metav1.Now()}}
	if _, err := pods.UpdateStatus(d.t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		d.t.Fatal(err)
	}
}

// podGone: pod name is gone from the namespace.
func (d *deployment) podGone(name string) bool {
	d.t.Helper()
	_, err := d.kube.CoreV1().Pods(d.ns).Get(d.t.Context(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		d.t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// exchanges takes the simulator's record of the REST exchanges so far, and
// checks it against GitHub's description (apispec.Verify checks what follows).
func (d *deployment) exchanges() []githubsim.Exchange {
	d.t.Helper()
	desc, err := apispec.Load()
	if err != nil {
		d.t.Fatal(err)
	}
	rec := d.sim.Conformance()
	if rec.Dropped > 0 {
		d.t.Fatalf("the simulator dropped %d exchanges from its record", rec.Dropped)
	}
	for _, f := range desc.Check(d.t.Context(), rec).Failures {
		d.t.Errorf("GitHub API conformance: %s", f)
	}
	return rec.Exchanges
}

// runnerIDOf returns the runner id a REST path is about (…/actions/runners/{id}[/…]).
func runnerIDOf(path string) (int64, bool) {
	_, rest, ok := strings.Cut(path, "/actions/runners/")
	if !ok {
		return 0, false
	}
	seg, _, _ := strings.Cut(rest, "/")
	id, err := strconv.ParseInt(seg, 10, 64)
	return id, err == nil
}
