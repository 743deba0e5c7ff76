package tests

import (
	"encoding/json"
	"maps"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
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

// foreign registers an idle runner this deployment did not make, in scope sc.
func (d *deployment) foreign(sc, name string) githubsim.Runner {
	d.t.Helper()
	s, err := scope.Parse(sc)
	if err != nil {
		d.t.Fatal(err)
	}
	tok, err := d.gh.RegistrationToken(d.t.Context(), s)
	if err != nil {
		d.t.Fatal(err)
	}
	r, err := d.sim.Register(githubsim.Registration{Token: tok.Token, Scope: sc, Name: name, Ephemeral: true})
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
