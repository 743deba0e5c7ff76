package reconcile_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestForgedRunnerIDRemovesNoOtherRunner: a StatefulSet forged to look like one
// of this deployment's runners (its labels and annotations, in a scope the
// deployment serves) but recording another runner's id makes the sweeper
// remove nothing on GitHub: an id counts only if GitHub lists it under the
// runner's own name.
func TestForgedRunnerIDRemovesNoOtherRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	victimName := e.statefulSets()[0]
	victim := e.start(victimName)
	real, err := e.raw.AppsV1().StatefulSets(e.ns).Get(t.Context(), victimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int32(0)
	forged := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: victimName + "x", Namespace: e.ns, Labels: real.Labels, Annotations: map[string]string{}},
		Spec:       *real.Spec.DeepCopy(),
	}
	forged.Spec.Replicas = &zero
	for k, v := range real.Annotations {
		forged.Annotations[k] = v
	}
	// Created long ago (past the registration timeout), recording the victim's id.
	forged.Annotations[runnerpod.AnnotationSyncTime] = e.clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	forged.Annotations[runnerpod.AnnotationRunnerID] = idString(victim.ID)
	if _, err := e.raw.AppsV1().StatefulSets(e.ns).Create(t.Context(), forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.clock.Step(time.Minute)
		e.mustSweep(2, time.Time{})
	}
	if _, ok := e.sim.Runner(victim.ID); !ok {
		t.Fatal("the runner whose id the forged object recorded was removed from GitHub")
	}
	if n := e.sim.Calls()[removeCall]; n != 0 {
		t.Fatalf("%d RemoveRunner calls, want none", n)
	}
}

// TestForgedPodIDStripsNoOtherRunnersLabels: a runner pod of this deployment
// whose runner-id annotation was rewritten to name another runner of the scope
// (another team's, or an ARC runner) is stopped without any GitHub write about
// that runner: the stop acts on the runner id the roster recorded, so the
// foreign runner keeps its labels and its registration.
func TestForgedPodIDStripsNoOtherRunnersLabels(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	tok, err := w.gh.RegistrationToken(t.Context(), w.pool.Scope())
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := w.sim.Register(githubsim.Registration{Token: tok.Token, Scope: "organization/acme", Name: "other-team-runner",
		Labels: []string{"big"}})
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, runnerpod.AnnotationRunnerID, idString(foreign.ID))
	if _, err := w.kube.CoreV1().Pods(w.ns).Patch(t.Context(), w.name+"-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.scaleDownAndConfirmIdle()
	for range 3 {
		if err := w.sweep(0, time.Time{}); err != nil {
			t.Fatal(err)
		}
		w.endStoppedRunners()
		w.clock.Step(time.Minute)
	}
	rn, ok := w.sim.Runner(foreign.ID)
	if !ok {
		t.Fatal("the foreign runner whose id the pod recorded was removed from GitHub")
	}
	if !slices.Contains(rn.Labels, "big") {
		t.Fatalf("the foreign runner's labels on GitHub %v: its custom label was removed", rn.Labels)
	}
}

const labelsCall = "DELETE /orgs/{org}/actions/runners/{runner_id}/labels"

// TestForgedOrphanPodTouchesNoOtherRunner: anyone who can create pods in a
// runner namespace makes a Pending pod with this deployment's marks, our
// finalizer, no owner, a label naming a live runner of the deployment and that
// runner's id. The sweeper finishes it as an orphan named by its own name: no
// GitHub call is made about the victim, and the victim's Secret stays.
func TestForgedOrphanPodTouchesNoOtherRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	victimName := e.statefulSets()[0]
	victim := e.start(victimName)
	e.mustSweep(1, time.Time{})
	real := e.pod(victimName + "-0")
	forged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "evil-0", Namespace: e.ns, Labels: map[string]string{}, Annotations: map[string]string{},
			Finalizers: []string{runnerpod.Finalizer}},
		Spec: *real.Spec.DeepCopy(),
	}
	forged.Spec.NodeName = ""
	for k, v := range real.Labels {
		forged.Labels[k] = v
	}
	for k, v := range real.Annotations {
		forged.Annotations[k] = v
	}
	forged.Labels[runnerpod.LabelRunner] = victimName
	forged.Annotations[runnerpod.AnnotationJITRunnerID] = idString(victim.ID)
	forged.Annotations[runnerpod.AnnotationRunnerID] = idString(victim.ID)
	if _, err := e.raw.CoreV1().Pods(e.ns).Create(t.Context(), forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.clock.Step(time.Minute)
		e.mustSweep(1, time.Time{})
	}
	if _, ok := e.sim.Runner(victim.ID); !ok {
		t.Fatal("the runner the forged pod named was removed from GitHub")
	}
	if n := e.sim.Calls()[removeCall] + e.sim.Calls()[labelsCall]; n != 0 {
		t.Fatalf("%d RemoveRunner or label calls, want none", n)
	}
	if _, err := e.raw.CoreV1().Secrets(e.ns).Get(t.Context(), victimName, metav1.GetOptions{}); err != nil {
		t.Fatalf("the victim's Secret: %v, want it kept", err)
	}
	if !slices.Equal(e.statefulSets(), []string{victimName}) {
		t.Fatalf("statefulsets %v, want the victim's kept", e.statefulSets())
	}
}
