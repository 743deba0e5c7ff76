package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// The failure paths of container mode (issue #47, docs/design/workflow-pods.md)
// on the closed loop: a container job runs in its workflow pod, made by the
// hooks as local/fakehook plays them, and a fault hits the runner or the
// workflow pod. Each test judges by the simulator's truth and the cluster's
// objects what became of the job, the runner and the workflow pod.

// TestContainerModeRunnerKeptWhileItsWorkflowPodRuns: a container job runs in
// its workflow pod; every other busy signal says idle — GitHub's REST view
// lists the runner idle, the runner pod's own report is lost (its container
// turns not ready: its job probe answers "no job"), and the job's in_progress
// delivery never came (no job↔runner link) — and the pool is scaled to zero
// (its Draining form, as a teardown or a removed pool sweeps it). The sweeper
// tries to stop the runner and the workflow pod vetoes it: while the job runs
// the runner keeps its registration and labels, and its pod is not deleted.
// Once the job has ended, the runner goes, and nothing of it or its hooks is left.
func TestContainerModeRunnerKeptWhileItsWorkflowPodRuns(t *testing.T) {
	t.Parallel()
	removed := &metricCounter{name: "WorkflowPodsRemoved"}
	c := newContainerModeWorld(t, cmSetup{mode: pool.ContainerModeNoVolume, opts: loop.Options{SweepEvery: time.Second, SweeperMetrics: removed}})
	queued := c.queueContainerJob(45*time.Second, "echo in the job container; sleep 40")
	c.loop.Sim.LoseDelivery(queued.ID, "in_progress", 1)
	j, wp := c.inWorkflowPod(queued.ID)

	if err := c.loop.Sim.SetRESTBusy(j.RunnerID, false); err != nil {
		t.Fatal(err)
	}
	pod := c.runnerPod(j.RunnerName)
	loseJobReport(t, pod)
	c.waitFor("the runner pod reporting no job (its runner container running, not ready)", time.Minute, func() bool {
		pod = c.runnerPod(j.RunnerName)
		cs := runnerpod.RunnerStatus(pod)
		return cs != nil && cs.State.Running != nil && !cs.Ready
	})
	registered, _ := c.loop.Sim.Runner(j.RunnerID)
	if busy, ok := c.loop.Sim.RESTBusy(j.RunnerID); !ok || busy {
		t.Fatalf("GitHub's REST view of runner %s: listed %v, busy %v; want listed idle", j.RunnerName, ok, busy)
	}
	if got := c.job(j.ID); got.State != githubsim.JobInProgress {
		t.Fatalf("job %d ended (%s) before the signals were lost; make it longer\n%s", j.ID, got.Conclusion, c.diagnose())
	}

	// Scaled to zero while the job runs.
	drained := *c.cfg
	drained.Pools = []pool.Pool{*c.cfg.Pools[0].Draining()}
	if err := c.loop.UpdatePools(&drained); err != nil {
		t.Fatal(err)
	}
	vetoes := func() float64 { return c.loop.BusySignalMetrics()["RemovalsVetoedByWorkflowPod"] }
	before := vetoes()

	// Each look reads the registration and the pods before the job: one seen
	// gone while the job, read after it, still ran went under the job.
	var under []string
	seen := map[string]bool{}
	goneUnder := func(what string) {
		if !seen[what] {
			seen[what] = true
			under = append(under, what+" at "+time.Now().UTC().Format(time.RFC3339))
		}
	}
	var vetoedWhileRunning float64
	c.waitFor("the job completed", 3*time.Minute, func() bool {
		r, ok := c.loop.Sim.Runner(j.RunnerID)
		podExists, podDeleting := c.podLook(pod.Name, pod.UID)
		v, swept := vetoes(), removed.sum()
		if c.job(j.ID).State == githubsim.JobCompleted {
			return true
		}
		vetoedWhileRunning = v - before
		switch {
		case !ok:
			goneUnder("its GitHub registration removed")
		case !slices.Equal(r.Labels, registered.Labels):
			goneUnder("its labels withdrawn (" + strings.Join(r.Labels, ",") + ")")
		}
		if !podExists || podDeleting {
			goneUnder("its pod deleted")
		}
		if swept > 0 {
			goneUnder("a workflow pod deleted by the sweeper") // the hooks' cleanup deletes it as the job ends
		}
		return false
	})
	got := c.job(j.ID)
	if got.Conclusion != githubsim.JobSuccess || got.LostRunner || got.RunnerName != j.RunnerName {
		t.Errorf("job %d on %s ended %s (runner removed under it: %v; %s), want success on %s", got.ID, got.RunnerName,
			got.Conclusion, got.LostRunner, got.FailureReason, j.RunnerName)
	}
	if len(under) > 0 {
		t.Errorf("while job %d ran (%s – %s) in workflow pod %s: %s", got.ID, got.StartedAt.UTC().Format(time.RFC3339),
			got.EndedAt.UTC().Format(time.RFC3339), wp.Name, strings.Join(under, "; "))
	}
	if vetoedWhileRunning < 1 {
		t.Errorf("no stop of the runner vetoed by its workflow pod while the job ran (RemovalsVetoedByWorkflowPod +%v): the sweeper never tried to stop it, not the path under test",
			vetoedWhileRunning)
	}
	if t.Failed() {
		t.Fatalf("%s\nlog lines about %s:\n%s", c.diagnose(), j.RunnerName, strings.Join(c.logs.matching([]string{runnername.FromPod(j.RunnerName)}, 60), "\n"))
	}
	t.Logf("runner %s kept for job %d (%d stops vetoed by workflow pod %s) though GitHub said idle, its pod reported no job and no in_progress came",
		j.RunnerName, j.ID, int(vetoedWhileRunning), wp.Name)

	c.waitFor("the runner gone after its job", 2*time.Minute, func() bool {
		_, registered := c.loop.Sim.Runner(j.RunnerID)
		podExists, _ := c.podLook(pod.Name, pod.UID)
		return !registered && !podExists
	})
	c.waitFor("back to zero", 2*time.Minute, c.quiescent)
	c.noHooksLeft()
	c.noViolations()
}

// TestContainerModeDrainWaitsForTheJob: a node running a container job (in
// kubernetes mode: the workflow pod beside the runner pod, on its node) is
// drained as `kubectl drain` does: the runner pod and the workflow pod are
// evicted through the eviction API, each refusal (429) tried again every
// second. Both are refused while the job runs — the runner pod by the pool's
// budget (it is Ready: it reports its job), the workflow pod by the
// workflow-pod budget — and the job succeeds; the runner pod is evicted only
// after the job ended, and the workflow pod never is (the hooks' cleanup
// deletes it at the job's end).
func TestContainerModeDrainWaitsForTheJob(t *testing.T) {
	t.Parallel()
	c := newContainerModeWorld(t, cmSetup{mode: pool.ContainerModeKubernetes, opts: loop.Options{SweepEvery: time.Second}})
	ctx := t.Context()
	queued := c.queueContainerJob(20*time.Second, "sleep 18")
	j, wp := c.inWorkflowPod(queued.ID)
	if wp.Labels[runnerpod.LabelWorkflowPool] != "cm" || wp.Annotations[runnerpod.AnnotationDoNotDisrupt] != "true" {
		t.Fatalf("workflow pod %s: labels %v, annotations %v; want the pool's workflow label and do-not-disrupt", wp.Name, wp.Labels, wp.Annotations)
	}
	var busy *corev1.Pod
	c.waitFor("the runner's pod Ready (reporting its job), marked do-not-disrupt", time.Minute, func() bool {
		busy = c.runnerPod(j.RunnerName)
		return podReady(busy) && busy.Annotations[runnerpod.AnnotationDoNotDisrupt] == "true"
	})
	// The barrier: the disruption controller has computed both budgets, each
	// selecting its one pod; what they allow is the drain's to find out.
	var budgets []string
	c.waitFor("the disruption controller's view of both budgets, each over its pod", 30*time.Second, func() bool {
		budgets = nil
		for _, b := range []struct{ ns, name string }{
			{c.ns, reconcile.BudgetName(c.pool)}, {c.hookNS, reconcile.WorkflowBudgetName(c.pool)}} {
			pdb, err := c.kube.PolicyV1().PodDisruptionBudgets(b.ns).Get(ctx, b.name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			st := pdb.Status
			if st.ObservedGeneration != pdb.Generation || st.ExpectedPods != 1 {
				return false
			}
			budgets = append(budgets, fmt.Sprintf("%s: %+v", pdb.Name, st))
		}
		return true
	})
	t.Logf("budgets: %s", strings.Join(budgets, "; "))
	if got := c.job(j.ID); got.State != githubsim.JobInProgress {
		t.Fatalf("job %d ended (%s) before the drain; make it longer", j.ID, got.Conclusion)
	}

	// The drain: the loop's for the runner pod, and the same for the workflow
	// pod (the loop drains the pools' runner pods only).
	var report loop.DrainReport
	var drainErr error
	var wpAnswers []loop.Eviction
	var wg sync.WaitGroup
	wg.Go(func() {
		report, drainErr = c.loop.Drain(ctx, busy.Spec.NodeName, loop.DrainOptions{Timeout: time.Minute, Retry: time.Second})
	})
	wg.Go(func() { wpAnswers = evictUntil(t, c, wp, time.Second, time.Minute) })
	wg.Wait()
	if drainErr != nil || len(report.GaveUp) > 0 {
		t.Fatalf("drain: %v, gave up on %v; answers %+v", drainErr, report.GaveUp, report.Answers)
	}
	c.waitFor("the job completed", time.Minute, func() bool { return c.job(j.ID).State == githubsim.JobCompleted })
	done := c.job(j.ID)
	if done.Conclusion != githubsim.JobSuccess {
		t.Errorf("job %d ended %s (%s), want success", done.ID, done.Conclusion, done.Output)
	}
	var busyAnswers []loop.Eviction
	for _, a := range report.Answers {
		if a.Pod == busy.Name {
			busyAnswers = append(busyAnswers, a)
		}
	}
	// Once the job ended, either answer ends the drain of either pod: evicted,
	// or gone (the ephemeral runner finished and the sweeper removed it, the
	// hooks' cleanup deleted the workflow pod) before the next retry came.
	judgeEvictions(t, "runner pod "+busy.Name, busyAnswers, done)
	judgeEvictions(t, "workflow pod "+wp.Name, wpAnswers, done)
	if t.Failed() {
		t.FailNow()
	}
	c.waitFor("back to zero", 2*time.Minute, c.quiescent)
	c.noHooksLeft()
	c.noViolations()
}

// judgeEvictions: every eviction of a pod answered while job ran was refused
// (429), one a second for most of its run; the last answer came after the job
// ended and accepted the eviction (201) or found the pod gone (404).
func judgeEvictions(t *testing.T, what string, answers []loop.Eviction, job githubsim.Job) {
	t.Helper()
	if len(answers) == 0 {
		t.Errorf("%s: no eviction answered", what)
		return
	}
	refused := 0
	for i, a := range answers {
		last := i == len(answers)-1
		switch {
		case a.Code == http.StatusCreated && a.At.Before(job.EndedAt):
			t.Errorf("%s evicted at %s, while its job ran (ended %s)", what, a.At.Format(time.StampMilli), job.EndedAt.Format(time.StampMilli))
		case !last && a.Code != http.StatusTooManyRequests:
			t.Errorf("%s: eviction %d answered %d (%v), want 429 until the last", what, i, a.Code, a.Err)
		case last && a.Code == http.StatusTooManyRequests:
			t.Errorf("%s: evictions all refused, the last at %s (job ended %s)", what, a.At.Format(time.StampMilli), job.EndedAt.Format(time.StampMilli))
		case last && a.Code != http.StatusNotFound && a.Code != http.StatusCreated:
			t.Errorf("%s: last eviction answered %d (%v), want the pod gone or evicted once the job ended", what, a.Code, a.Err)
		case a.Code == http.StatusTooManyRequests && a.At.Before(job.EndedAt):
			refused++
		}
	}
	if refused < 5 {
		t.Errorf("%s: evictions refused %d times while its job ran, want one a second for most of it: %+v", what, refused, answers)
	}
	l := answers[len(answers)-1]
	t.Logf("%s: refused %d times while job %d ran, then %d at %s (job ended %s)", what, refused, job.ID, l.Code,
		l.At.Format(time.StampMilli), job.EndedAt.Format(time.StampMilli))
}

// TestContainerModeRunnerPodKilledMidJob: the runner whose container job runs
// in its workflow pod dies mid-job, and the hooks' cleanup never runs: the
// workflow pod would run `tail -f /dev/null` for ever. Either its pod is
// killed (`kubectl delete pod --grace-period=0 --force`, as a node lost) or
// the kernel OOM-kills its container (the pod stays; actions/runner-container-hooks
// #143). The sweeper deletes the workflow pod within its grace period
// (reconcile.DefaultWorkflowPodGrace, which the loop leaves as it is) of the
// runner's death, plus the sweeps that see it, counting it
// (WorkflowPodsRemoved); the job, failed as its runner was lost, is re-run
// once (rerunsPerRun 1) on another runner, and the re-run succeeds. Nothing is
// left.
func TestContainerModeRunnerPodKilledMidJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// kill kills the runner of pod, and returns once its death is seen.
		kill func(c *cmWorld, pod *corev1.Pod)
		// slack: beyond the grace, how long the sweeper may take to see it.
		slack time.Duration
	}{
		{"deleted", forceDelete, 15 * time.Second},
		{"oom-killed", oomKilled, 40 * time.Second}, // its retirement comes first: ~15 s here
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			killedMidJob(t, tc.kill, tc.slack)
		})
	}
}

// forceDelete deletes pod with grace 0, as `kubectl delete pod --force`, and
// waits for it to be gone.
func forceDelete(c *cmWorld, pod *corev1.Pod) {
	c.t.Helper()
	c.loop.Monitor.Fault(pod.Name, "deleted by hand") // the kill is the test's: the monitor excuses it
	err := c.kube.CoreV1().Pods(c.ns).Delete(c.t.Context(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64),
		Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil {
		c.t.Fatalf("killing runner pod %s: %v", pod.Name, err)
	}
	c.waitFor("the killed runner pod gone", 2*time.Minute, func() bool { exists, _ := c.podLook(pod.Name, pod.UID); return !exists })
}

// oomKilled has the kernel OOM-kill pod's runner container (loop.OOMKill,
// which notes the fault), and waits for the pod's status to show it.
func oomKilled(c *cmWorld, pod *corev1.Pod) {
	c.t.Helper()
	if err := c.loop.OOMKill(c.t.Context(), pod); err != nil {
		c.t.Fatal(err)
	}
	c.waitFor("the runner container's OOM kill in its pod's status", time.Minute, func() bool {
		now, err := c.kube.CoreV1().Pods(c.ns).Get(c.t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return apierrors.IsNotFound(err)
		}
		term := lastTermination(now)
		return now.UID != pod.UID || term != nil && term.ExitCode == 137
	})
}

// killedMidJob runs TestContainerModeRunnerPodKilledMidJob with kill.
func killedMidJob(t *testing.T, kill func(c *cmWorld, pod *corev1.Pod), slack time.Duration) {
	removed := &metricCounter{name: "WorkflowPodsRemoved"}
	c := newContainerModeWorld(t, cmSetup{mode: pool.ContainerModeNoVolume, memoryLimit: "98304000",
		opts: loop.Options{SweepEvery: time.Second, LostAfter: 3 * time.Second, SweeperMetrics: removed}})
	queued := c.queueContainerJob(25*time.Second, "sleep 22")
	j, wp := c.inWorkflowPod(queued.ID)
	pod := c.runnerPod(j.RunnerName)

	kill(c, pod)
	gone := time.Now()
	if got := c.job(j.ID); got.State == githubsim.JobCompleted && got.Conclusion == githubsim.JobSuccess {
		t.Fatalf("job %d succeeded though its runner pod was killed: not the path under test", j.ID)
	}
	if exists, _ := c.workflowPodLook(wp.Name, string(wp.UID)); !exists {
		t.Fatalf("workflow pod %s already gone when its runner was seen dead: the hooks' cleanup ran, not the path under test", wp.Name)
	}
	limit := reconcile.DefaultWorkflowPodGrace + slack
	c.waitFor("the leftover workflow pod deleted within its grace", limit, func() bool {
		exists, deleting := c.workflowPodLook(wp.Name, string(wp.UID))
		return !exists || deleting
	})
	took := time.Since(gone)
	// The sweep that deleted it writes its metrics as it ends.
	c.waitFor("the sweeper's count of the deletion (WorkflowPodsRemoved)", 20*time.Second, func() bool { return removed.sum() >= 1 })
	t.Logf("workflow pod %s deleted %s after the runner of pod %s was seen dead (grace %s)", wp.Name, took.Round(100*time.Millisecond),
		pod.Name, reconcile.DefaultWorkflowPodGrace)

	cand := c.decided("cm", j.ID)
	if cand.Decision != rerun.Rerun {
		t.Fatalf("re-run decision %+v: want a re-run of the job whose runner was killed", cand)
	}
	c.waitFor("the re-run completed", 3*time.Minute, func() bool {
		rs := c.loop.Sim.Reruns()[j.ID]
		return len(rs) == 1 && c.job(rs[0]).State == githubsim.JobCompleted
	})
	again := c.job(c.loop.Sim.Reruns()[j.ID][0])
	if again.Conclusion != githubsim.JobSuccess || again.RunAttempt != 2 || again.RunnerName == j.RunnerName || again.Container == nil {
		t.Fatalf("re-run %+v: want attempt 2 of the container job, succeeded on another runner", again)
	}
	c.waitFor("back to zero", 2*time.Minute, c.quiescent)
	if n := len(c.loop.Sim.Reruns()[j.ID]); n != 1 {
		t.Fatalf("job %d re-run %d times, want once", j.ID, n)
	}
	c.noHooksLeft()
	c.noViolations()
}

// TestContainerModeUnschedulableWorkflowPod: the pool's hookTemplate gives
// workflow pods a node selector no node has, and its runners'
// ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS is short (10 s). While the
// hooks wait for the workflow pod, `runnerscaler status cm` shows it pending
// with the scheduler's reason; then prepare_job gives up, the job fails on
// GitHub's side (not as a lost runner, and it is not re-run: its runner did
// not die), the runner is released (unregistered, its pod and StatefulSet
// gone), and nothing of the hooks is left.
func TestContainerModeUnschedulableWorkflowPod(t *testing.T) {
	t.Parallel()
	c := newContainerModeWorld(t, cmSetup{mode: pool.ContainerModeNoVolume, opts: loop.Options{SweepEvery: time.Second},
		env:          []corev1.EnvVar{{Name: "ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS", Value: "10"}},
		hookTemplate: `{metadata: {labels: {team: ci}}, spec: {nodeSelector: {runnerscaler.dev/no-such-node: "true"}}}`})
	ctx := t.Context()
	queued := c.queueContainerJob(5*time.Second, "echo ran")
	var j githubsim.Job
	var wp *corev1.Pod
	c.waitFor("the job's workflow pod unschedulable", 3*time.Minute, func() bool {
		if j = c.job(queued.ID); j.State != githubsim.JobInProgress {
			return false
		}
		pod, err := c.kube.CoreV1().Pods(c.hookNS).Get(ctx, runnerpod.WorkflowPodName(j.RunnerName), metav1.GetOptions{})
		if err != nil {
			return false
		}
		wp = pod
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	})

	// `runnerscaler status cm` while the job waits for it (the job read after the status).
	g := c.gatherer()
	want := "workflow pod " + wp.Name + " Pending (" + corev1.PodReasonUnschedulable + ": "
	var shown string
	c.waitFor("status showing the workflow pod pending with the scheduler's reason", time.Minute, func() bool {
		r, err := g.Report(ctx, "cm")
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if err := status.RenderPool(&out, r.At, r.Pools[0]); err != nil {
			t.Fatal(err)
		}
		shown = out.String()
		if !strings.Contains(shown, want) {
			if c.job(j.ID).State == githubsim.JobCompleted {
				t.Fatalf("job %d ended before status showed %q:\n%s", j.ID, want, shown)
			}
			return false
		}
		return c.job(j.ID).State == githubsim.JobInProgress
	})
	t.Logf("status cm while job %d waits:\n%s", j.ID, shown)

	c.waitFor("the job completed", 2*time.Minute, func() bool { return c.job(j.ID).State == githubsim.JobCompleted })
	done := c.job(j.ID)
	if done.Conclusion != githubsim.JobFailure || done.LostRunner || strings.Contains(done.Output, "ran\n") {
		t.Fatalf("job %d ended %s (lost runner: %v; %s), output:\n%s\nwant a failure in prepare_job, its script never run", done.ID,
			done.Conclusion, done.LostRunner, done.FailureReason, done.Output)
	}
	if cand := c.decided("cm", j.ID); cand.Decision != rerun.NotRerun {
		t.Errorf("re-run decision %+v: want none, the job failed by itself", cand)
	}
	c.waitFor("the runner released", 2*time.Minute, func() bool {
		_, registered := c.loop.Sim.Runner(j.RunnerID)
		_, err := c.kube.CoreV1().Pods(c.ns).Get(ctx, j.RunnerName, metav1.GetOptions{})
		return !registered && apierrors.IsNotFound(err)
	})
	c.waitFor("back to zero", 2*time.Minute, c.quiescent)
	if rs := c.loop.Sim.Reruns(); len(rs) != 0 {
		t.Errorf("re-runs %v, want none", rs)
	}
	c.noHooksLeft()
	c.noViolations()
}

// TestContainerModeForgedHookObjectsSteerNothing: in a kubernetes-mode pool,
// the runners' service account (the hooks' rights in the runner namespace:
// pods and Secrets get, list, create, delete) is used, with its own token, to
// forge — while a container job runs on the victim runner, which GitHub's REST
// view lists idle for its whole job — a pod named like the victim's orphan
// (its StatefulSet's name) with every mark of the victim's pod and our
// finalizer, a never-scheduled pod of the pool whose runner label names the
// victim and which records its id, workflow pods naming the victim and a
// runner of the pool that does not exist, a Secret with every mark of the
// victim's Secret and its runner id, written an hour ago under another
// runner's name (the sweeps after a runner's creation look at the pool's
// Secrets: cleanup), and a Secret with the hooks' label naming the victim. Over the sweeps of the rest
// of the job (more than the workflow-pod grace), none of it steers the
// sweeper: the victim keeps its registration and labels, its Secret,
// StatefulSet and pod, and its job ends in success; the forged pods carrying
// our finalizer are left alone.
func TestContainerModeForgedHookObjectsSteerNothing(t *testing.T) {
	t.Parallel()
	sweeps, foreign := &metricCounter{name: "SweepDuration"}, &metricCounter{name: "ForeignObjects"}
	c := newContainerModeWorld(t, cmSetup{mode: pool.ContainerModeKubernetes, opts: loop.Options{SweepEvery: time.Second,
		BusyLie: &githubsim.BusyLie{MinLag: time.Hour, MaxLag: time.Hour}, SweeperMetrics: io.MultiWriter(sweeps, foreign)}})
	ctx := t.Context()
	queued := c.queueContainerJob(80*time.Second, "sleep 75")
	j, wp := c.inWorkflowPod(queued.ID)
	name := runnername.FromPod(j.RunnerName)
	victimPod := c.runnerPod(j.RunnerName)
	secret, err := c.kube.CoreV1().Secrets(c.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sts, err := c.kube.AppsV1().StatefulSets(c.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	registered, _ := c.loop.Sim.Runner(j.RunnerID)
	if busy, ok := c.loop.Sim.RESTBusy(j.RunnerID); !ok || busy {
		t.Fatalf("GitHub's REST view of the victim %s: listed %v, busy %v; want listed idle (the lie)", j.RunnerName, ok, busy)
	}

	// The forgeries, with the runners' service account's token.
	sa := serviceAccountClient(t, c.kube, c.ns, "cm-runner")
	pending := corev1.PodSpec{NodeSelector: map[string]string{"runnerscaler.dev/no-such-node": "true"},
		Containers: []corev1.Container{{Name: runnerpod.ContainerName, Image: "runner:1"}}}
	marked := func(podName string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: podName, Labels: maps.Clone(victimPod.Labels), Annotations: maps.Clone(victimPod.Annotations),
			Finalizers: []string{runnerpod.Finalizer}}
	}
	idOf := victimPod.Annotations[runnerpod.AnnotationRunnerID]
	other := marked(c.pool.Name + "-frgdp-0")
	other.Annotations[runnerpod.AnnotationRunnerID], other.Annotations[runnerpod.AnnotationJITRunnerID] = idOf, idOf
	workflow := func(podName, runner string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: podName, Labels: map[string]string{runnerpod.LabelHookRunnerPod: runner,
			runnerpod.LabelWorkflowPool: c.pool.Name}}
	}
	var forgedPods []*corev1.Pod
	for _, meta := range []metav1.ObjectMeta{
		marked(name), // the orphan's name: the StatefulSet's, no -0
		other,
		workflow(runnerpod.WorkflowPodName(j.RunnerName)+"-2", j.RunnerName),
		workflow(runnerpod.WorkflowPodName(c.pool.Name+"-zzzzz-0"), c.pool.Name+"-zzzzz-0"),
	} {
		p, err := sa.CoreV1().Pods(c.ns).Create(ctx, &corev1.Pod{ObjectMeta: meta, Spec: pending}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("forging pod %s with the runners' service account: %v", meta.Name, err)
		}
		forgedPods = append(forgedPods, p)
	}
	hourAgo := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	likeRunners := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.pool.Name + "-frgds", Labels: maps.Clone(secret.Labels),
		Annotations: maps.Clone(secret.Annotations)}, Data: secret.Data, Type: secret.Type}
	likeRunners.Annotations[runnerpod.AnnotationSyncTime] = hourAgo
	likeRunners.Annotations[runnerpod.AnnotationRunnerID] = strconv.FormatInt(j.RunnerID, 10)
	hooks := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: j.RunnerName + "-secret-frgd0001",
		Labels: map[string]string{runnerpod.LabelHookRunnerPod: j.RunnerName}}}
	var forgedSecrets []string
	for _, s := range []*corev1.Secret{likeRunners, hooks} {
		if _, err := sa.CoreV1().Secrets(c.ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("forging Secret %s with the runners' service account: %v", s.Name, err)
		}
		forgedSecrets = append(forgedSecrets, s.Name)
	}
	forged := time.Now()
	sweptBefore := sweeps.count()

	var under []string
	seen := map[string]bool{}
	goneUnder := func(what string) {
		if !seen[what] {
			seen[what] = true
			under = append(under, what+" at "+time.Now().UTC().Format(time.RFC3339))
		}
	}
	c.waitFor("the victim's job completed", 3*time.Minute, func() bool {
		r, registeredNow := c.loop.Sim.Runner(j.RunnerID)
		podExists, podDeleting := c.podLook(victimPod.Name, victimPod.UID)
		secExists, secDeleting := c.secretLook(name, secret.UID)
		stsNow, stsErr := c.kube.AppsV1().StatefulSets(c.ns).Get(ctx, name, metav1.GetOptions{})
		if c.job(j.ID).State == githubsim.JobCompleted {
			return true
		}
		switch {
		case !registeredNow:
			goneUnder("its GitHub registration removed")
		case !slices.Equal(r.Labels, registered.Labels):
			goneUnder("its labels withdrawn (" + strings.Join(r.Labels, ",") + ")")
		}
		if !podExists || podDeleting {
			goneUnder("its pod deleted")
		}
		if !secExists || secDeleting {
			goneUnder("its Secret deleted")
		}
		if stsErr != nil || stsNow.UID != sts.UID || stsNow.DeletionTimestamp != nil {
			goneUnder("its StatefulSet deleted")
		}
		if _, marked := stsNow.Annotations[runnerpod.AnnotationUnregistrationRequest]; stsErr == nil && marked {
			goneUnder("its stop begun")
		}
		return false
	})
	swept := sweeps.count() - sweptBefore
	ran := time.Since(forged)
	got := c.job(j.ID)
	if got.Conclusion != githubsim.JobSuccess || got.LostRunner || got.RunnerName != j.RunnerName {
		t.Errorf("victim's job %d on %s ended %s (runner removed under it: %v; %s), want success on %s",
			got.ID, got.RunnerName, got.Conclusion, got.LostRunner, got.FailureReason, j.RunnerName)
	}
	if len(under) > 0 {
		t.Errorf("while the victim's job %d ran, after the forgeries: %s", got.ID, strings.Join(under, "; "))
	}
	if lost := c.loop.Sim.LostJobs(); len(lost) != 0 {
		t.Errorf("jobs lost to a removal of their runner: %+v", lost)
	}
	if foreign.sum() < 1 {
		t.Errorf("no sweep named a foreign object: the sweeper never saw the forged pods of the pool, not the path under test")
	}
	if swept < 10 || ran < reconcile.DefaultWorkflowPodGrace {
		t.Errorf("the forgeries lived %s through %d sweeps of the pool before the job ended; want 10 and the workflow-pod grace %s at least: make the job longer",
			ran.Round(time.Second), swept, reconcile.DefaultWorkflowPodGrace)
	}
	for _, p := range forgedPods[:2] {
		now, err := c.kube.CoreV1().Pods(c.ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || now.UID != p.UID || now.DeletionTimestamp != nil || !slices.Contains(now.Finalizers, runnerpod.Finalizer) {
			t.Errorf("forged pod %s: %v (deleting %v, finalizers %v); want it left alone as a foreign object", p.Name, err,
				err == nil && now.DeletionTimestamp != nil, func() []string {
					if err != nil {
						return nil
					}
					return now.Finalizers
				}())
		}
	}
	if t.Failed() {
		t.Fatalf("%s\nlog lines about %s:\n%s", c.diagnose(), name, strings.Join(c.logs.matching([]string{name}, 80), "\n"))
	}
	t.Logf("victim %s kept through %d sweeps (%s) beside the forged pods %s and Secrets %s; workflow pod %s", j.RunnerName, swept,
		ran.Round(time.Second), podNames(forgedPods), forgedSecrets, wp.Name)

	// The forgeries go (their creator's to remove: the admin here), then nothing is left.
	for _, p := range forgedPods {
		_, _ = c.kube.CoreV1().Pods(c.ns).Patch(context.Background(), p.Name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = c.kube.CoreV1().Pods(c.ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}
	for _, s := range forgedSecrets {
		_ = c.kube.CoreV1().Secrets(c.ns).Delete(context.Background(), s, metav1.DeleteOptions{})
	}
	c.waitFor("back to zero", 2*time.Minute, c.quiescent)
	c.noHooksLeft()
	c.noViolations()
}

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// noHooksLeft waits for no pod or Secret labelled runner-pod in the hook
// namespace and no claim in the runners' namespace.
func (c *cmWorld) noHooksLeft() {
	c.t.Helper()
	t, ok := c.t.(*testing.T)
	if !ok {
		return
	}
	c.waitFor("nothing of the hooks left", time.Minute, func() bool {
		left := hooksLeftovers(t, c.world, c.hookNS, c.ns)
		if len(left) > 0 {
			c.left = left
		}
		return len(left) == 0
	})
}

// metricCounter receives the sweeper's metric lines (loop.Options.
// SweeperMetrics) and sums the field name over them, and counts the records
// that carry it.
type metricCounter struct {
	name    string
	mu      sync.Mutex
	partial []byte
	total   float64
	records int
}

func (m *metricCounter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.partial = append(m.partial, p...)
	for {
		line, rest, ok := strings.Cut(string(m.partial), "\n")
		if !ok {
			return len(p), nil
		}
		m.partial = []byte(rest)
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if v, ok := rec[m.name].(float64); ok {
			m.total += v
			m.records++
		}
	}
}

func (m *metricCounter) sum() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total
}

func (m *metricCounter) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.records
}
