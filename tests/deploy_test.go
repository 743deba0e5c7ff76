package tests

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/inventory"
	"github.com/runnerscaler/runnerscaler/internal/lease"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/internal/teardown"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// deployment is one runnerscaler deployment on the local stack: a table, a
// runner namespace, a GitHub simulator where one App is installed on two
// organizations (org-a: 11, org-b: 22) and a classic PAT administers the
// enterprise "corp", and the sweeper as the function builds it.
type deployment struct {
	t     *testing.T
	kube  kubernetes.Interface
	ns    string
	sim   *githubsim.Server
	gh    *githubapi.Router
	db    *dynamodb.Client
	rs    *reservation.Store
	table string
	job   int64
}

const deployPAT = "ghp_corp-admin"

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, ns := testenv.Namespace(t)
	kube, err := kubernetes.NewForConfig(testenv.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	sim := githubsim.New(githubsim.Options{AppID: 7, AppKey: &key.PublicKey,
		Accounts: map[int64]string{11: "org-a", 22: "org-b"}, PATs: []string{deployPAT}})
	apispec.Verify(t, sim)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	gh, err := githubapi.NewRouter(githubapi.Config{BaseURL: srv.URL, Auth: githubapi.Auth{AppID: 7, PrivateKey: keyPEM, Token: deployPAT}})
	if err != nil {
		t.Fatal(err)
	}
	db, table := testenv.Table(t)
	d := &deployment{t: t, kube: kube, ns: ns, sim: sim, gh: gh, db: db, table: table, rs: reservation.New(db, table, clock.RealClock{})}
	t.Cleanup(d.releaseFinalizers)
	return d
}

// pools is the pools file with the named pools of: a (org-a), b (org-b), e (enterprise corp).
func (d *deployment) pools(names ...string) *pool.Config {
	d.t.Helper()
	scopes := map[string]string{"a": "organization: org-a", "b": "organization: org-b", "e": "enterprise: corp"}
	var b strings.Builder
	b.WriteString("pools:\n")
	for _, n := range names {
		fmt.Fprintf(&b, `  - name: %s
    %s
    maxReplicas: 3
    kubernetes:
      namespace: %s
      image: runner:1
      template:
        spec:
          schedulerName: runnerscaler.dev/no-scheduler   # the test plays the kubelet
`, n, scopes[n], d.ns)
	}
	cfg, err := pool.Parse([]byte(b.String()))
	if err != nil {
		d.t.Fatal(err)
	}
	return cfg
}

// sweeper builds the sweeper function for a pools file, as functions/sweeper does.
func (d *deployment) sweeper(cfg *pool.Config) *sweeper.Sweeper {
	d.t.Helper()
	for i := range cfg.Pools {
		if err := d.gh.Serves(cfg.Pools[i].Scope()); err != nil {
			d.t.Fatal(err)
		}
	}
	clk := clock.RealClock{}
	rec, err := reconcile.New(cfg, d.kube, d.gh, clk, nil, reconcile.Options{Deployment: d.table, JobLinks: d.rs,
		Roster: roster.NewStore(d.db, d.table)})
	if err != nil {
		d.t.Fatal(err)
	}
	leases, err := lease.New(d.db, d.table, clk, 30*time.Second)
	if err != nil {
		d.t.Fatal(err)
	}
	s, err := sweeper.New(cfg, d.rs, poolstate.NewStore(d.db, d.table), leases,
		rec, clk, nil, sweeper.Options{Removed: inventory.New(d.kube, d.table), Drain: teardown.NewMark(d.db, d.table)})
	if err != nil {
		d.t.Fatal(err)
	}
	return s
}

func (d *deployment) queue(pools ...string) {
	d.t.Helper()
	for _, p := range pools {
		d.job++
		if _, err := d.rs.Record(d.t.Context(), reservation.Delivery{Pool: p, JobID: d.job, State: reservation.Queued, Amount: 1, Duration: 10 * time.Minute}); err != nil {
			d.t.Fatal(err)
		}
	}
}

func (d *deployment) tick(s *sweeper.Sweeper) sweeper.Report {
	d.t.Helper()
	r, err := s.Handle(d.t.Context(), sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"})
	if err != nil {
		d.t.Fatalf("scheduled sweep: %v (%+v)", err, r)
	}
	return r
}

// runners returns the live StatefulSets by pool.
func (d *deployment) runners() map[string][]string {
	d.t.Helper()
	list, err := d.kube.AppsV1().StatefulSets(d.ns).List(d.t.Context(), metav1.ListOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, s := range list.Items {
		if s.DeletionTimestamp == nil {
			out[s.Labels[runnerpod.LabelPool]] = append(out[s.Labels[runnerpod.LabelPool]], s.Name)
		}
	}
	return out
}

// start plays the kubelet and the runner agent for runner name of a pool in
// scope: its pod runs and its runner connects with the JIT config of its Secret.
func (d *deployment) start(name, scope string) githubsim.Runner {
	d.t.Helper()
	ctx := d.t.Context()
	var pod *corev1.Pod
	for deadline := time.Now().Add(20 * time.Second); pod == nil; time.Sleep(50 * time.Millisecond) {
		if p, err := d.kube.CoreV1().Pods(d.ns).Get(ctx, runnerpod.PodName(name), metav1.GetOptions{}); err == nil {
			pod = p
		} else if time.Now().After(deadline) {
			d.t.Fatalf("pod of %s never appeared: %v", name, err)
		}
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
	if _, err := d.kube.CoreV1().Pods(d.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		d.t.Fatal(err)
	}
	sec, err := d.kube.CoreV1().Secrets(d.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	r, err := d.sim.Register(githubsim.Registration{JITConfig: string(sec.Data[runnerpod.SecretJITConfig]), Scope: scope,
		Name: runnerpod.PodName(name), Ephemeral: true})
	if err != nil {
		d.t.Fatalf("runner %s registering: %v", name, err)
	}
	return r
}

// exit plays the ephemeral runner finishing its job: GitHub removes it, its container exits 0.
func (d *deployment) exit(name string, id int64) {
	d.t.Helper()
	ctx := d.t.Context()
	if err := d.sim.FinishJob(id); err != nil {
		d.t.Fatal(err)
	}
	pod, err := d.kube.CoreV1().Pods(d.ns).Get(ctx, runnerpod.PodName(name), metav1.GetOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "runner", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.Now()}}}}
	if _, err := d.kube.CoreV1().Pods(d.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		d.t.Fatal(err)
	}
}

// leftovers lists every runner object in the namespace (pool budgets too) and
// every runner on GitHub.
func (d *deployment) leftovers(ctx context.Context) []string {
	var out []string
	opts := metav1.ListOptions{LabelSelector: runnerpod.LabelPool}
	if l, err := d.kube.AppsV1().StatefulSets(d.ns).List(ctx, opts); err == nil {
		for _, o := range l.Items {
			out = append(out, "statefulset/"+o.Name)
		}
	}
	if l, err := d.kube.CoreV1().Pods(d.ns).List(ctx, opts); err == nil {
		for _, o := range l.Items {
			out = append(out, "pod/"+o.Name)
		}
	}
	if l, err := d.kube.CoreV1().Secrets(d.ns).List(ctx, opts); err == nil {
		for _, o := range l.Items {
			out = append(out, "secret/"+o.Name)
		}
	}
	if l, err := d.kube.PolicyV1().PodDisruptionBudgets(d.ns).List(ctx, opts); err == nil {
		for _, o := range l.Items {
			out = append(out, "poddisruptionbudget/"+o.Name)
		}
	}
	for _, r := range d.sim.Runners() {
		out = append(out, "github/"+r.Scope.String()+"/"+r.Name)
	}
	return out
}

func (d *deployment) releaseFinalizers() {
	list, err := d.kube.CoreV1().Pods(d.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range list.Items {
		_, _ = d.kube.CoreV1().Pods(d.ns).Patch(context.Background(), p.Name, "application/merge-patch+json",
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
}

// inProcess invokes the sweeper as Lambda would, JSON in and out.
type inProcess struct{ s *sweeper.Sweeper }

func (i inProcess) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	var ev sweeper.Event
	if err := json.Unmarshal(event, &ev); err != nil {
		return nil, err
	}
	r, err := i.s.Handle(ctx, ev)
	if err != nil {
		return nil, err
	}
	return json.Marshal(r)
}

// TestOneDeploymentSeveralAccounts, on the local stack: one deployment serves pools in two organizations under two
// installations of one App and an enterprise pool with a PAT; a pool removed
// from the file is drained by the next sweeps without its busy runner being
// killed; and the teardown (runnerscaler drain) leaves nothing in the cluster or
// on GitHub, and keeps the pools at zero afterwards.
func TestOneDeploymentSeveralAccounts(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	all := d.sweeper(d.pools("a", "b", "e"))
	d.queue("a", "b", "e")
	if r := d.tick(all); len(r.Swept) != 3 {
		t.Fatalf("swept %v, want a, b and e", r.Swept)
	}
	got := d.runners()
	if len(got["a"]) != 1 || len(got["b"]) != 1 || len(got["e"]) != 1 {
		t.Fatalf("runners by pool %v, want one in each of a, b, e", got)
	}
	var scopes []string
	for _, r := range d.sim.Runners() {
		scopes = append(scopes, r.Scope.String())
	}
	slices.Sort(scopes)
	if want := []string{"enterprise/corp", "organization/org-a", "organization/org-b"}; !slices.Equal(scopes, want) {
		t.Fatalf("GitHub runners in %v, want %v", scopes, want)
	}
	if inst := d.gh.Installations(); inst["organization/org-a"] != 11 || inst["organization/org-b"] != 22 {
		t.Fatalf("installations %v, want org-a 11 and org-b 22", inst)
	}
	if n := d.sim.Calls()["POST /app/installations/{installation_id}/access_tokens"]; n != 2 {
		t.Fatalf("%d installation tokens, want one per installation", n)
	}

	// Pool b's runner takes a job; then b is removed from the file.
	busyName := got["b"][0]
	busy := d.start(busyName, "organization/org-b")
	if err := d.sim.SetBusy(busy.ID, true); err != nil {
		t.Fatal(err)
	}
	withoutB := d.sweeper(d.pools("a", "e"))
	r := d.tick(withoutB)
	if !slices.Contains(r.Swept, "b") {
		t.Fatalf("swept %v, want the removed pool b drained too", r.Swept)
	}
	if got := d.runners(); !slices.Equal(got["b"], []string{busyName}) || len(got["a"]) != 1 || len(got["e"]) != 1 {
		t.Fatalf("after removing b: runners %v; want b's busy runner kept and a, e untouched", got)
	}
	if _, ok := d.sim.Runner(busy.ID); !ok {
		t.Fatal("the busy runner of the removed pool was unregistered under its job")
	}
	d.exit(busyName, busy.ID)
	d.tick(withoutB)
	if got := d.runners(); len(got["b"]) != 0 {
		t.Fatalf("after its job: runners of b %v, want none", got["b"])
	}

	// Teardown.
	var out strings.Builder
	drainer := teardown.New(inProcess{withoutB}, clock.RealClock{}, &out)
	drainer.Interval = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := drainer.Drain(ctx); err != nil {
		t.Fatalf("drain: %v\n%s", err, out.String())
	}
	if left := d.leftovers(t.Context()); len(left) != 0 {
		t.Fatalf("left after the drain: %v\n%s", left, out.String())
	}
	d.queue("a", "e")
	d.tick(withoutB)
	if left := d.leftovers(t.Context()); len(left) != 0 {
		t.Fatalf("a sweep after the drain created %v", left)
	}
	if err := drainer.Cancel(t.Context()); err != nil {
		t.Fatal(err)
	}
	d.tick(withoutB)
	// Two jobs are still queued in each of a and e (none of them completed).
	if got := d.runners(); len(got["a"]) != 2 || len(got["e"]) != 2 {
		t.Fatalf("after cancelling the drain: runners %v, want a and e scaled as configured (2 each)", got)
	}
}
