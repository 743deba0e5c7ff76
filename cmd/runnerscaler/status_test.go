package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/lease"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// world is one test's deployment on the local stack: a table, a namespace, a
// pools file, and the real sweeper (with the real reconciler and a GitHub
// simulator when the test needs runners).
type world struct {
	t         *testing.T
	db        *dynamodb.Client
	table, ns string
	poolsFile string
	pools     *pool.Config
	kube      kubernetes.Interface
	clock     *clocktesting.FakeClock
	sweeper   *sweeper.Sweeper
}

// newWorld sets up poolsYAML (with %s for the namespace); withRunners adds the
// reconciler, so sweeps create StatefulSets.
func newWorld(t *testing.T, poolsYAML string, withRunners bool) *world {
	t.Helper()
	w := &world{t: t, clock: clocktesting.NewFakeClock(time.Now())}
	w.db, w.table = testenv.Table(t)
	w.kube, w.ns = testenv.Namespace(t)
	w.poolsFile = filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(w.poolsFile, []byte(fmt.Sprintf(poolsYAML, w.ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if w.pools, err = pool.Load(w.poolsFile); err != nil {
		t.Fatal(err)
	}
	var rec sweeper.Reconciler
	if withRunners {
		rec = w.reconciler()
	}
	if w.sweeper, err = sweeper.New(w.pools, reservation.New(w.db, w.table, w.clock), poolstate.NewStore(w.db, w.table),
		w.leases(), rec, w.clock, nil, sweeper.Options{}); err != nil {
		t.Fatal(err)
	}
	// The command's own AWS credentials: the local stack accepts any.
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_REGION", "us-east-1")
	return w
}

// leases are the sweeper's 30-second leases on the world's table.
func (w *world) leases() *lease.Leases {
	w.t.Helper()
	leases, err := lease.New(w.db, w.table, w.clock, 30*time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	return leases
}

func (w *world) reconciler() *reconcile.Reconciler {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		w.t.Fatal(err)
	}
	sim := githubsim.New(githubsim.Options{AppID: 1, AppKey: &key.PublicKey, Clock: w.clock,
		TokenLifetime: 48 * time.Hour, RegistrationTokenLifetime: 48 * time.Hour})
	apispec.Verify(w.t, sim)
	srv := httptest.NewServer(sim.Handler())
	w.t.Cleanup(srv.Close)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	gh, err := githubapi.New(githubapi.Config{BaseURL: srv.URL, Clock: w.clock,
		Auth: githubapi.Auth{AppID: 1, InstallationID: 1, PrivateKey: keyPEM}})
	if err != nil {
		w.t.Fatal(err)
	}
	rec, err := reconcile.New(w.pools, w.kube, gh, w.clock, nil, reconcile.Options{JobLinks: reservation.New(w.db, w.table, w.clock),
		Roster: roster.NewStore(w.db, w.table)})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(w.releaseFinalizers)
	return rec
}

func (w *world) releaseFinalizers() {
	list, err := w.kube.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range list.Items {
		_, _ = w.kube.CoreV1().Pods(w.ns).Patch(context.Background(), p.Name, "application/merge-patch+json",
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
}

// queue records a queued delivery of job in pool, first seen ago before now.
func (w *world) queue(pool string, job int64, ago time.Duration) {
	w.t.Helper()
	at := clocktesting.NewFakePassiveClock(w.clock.Now().Add(-ago))
	_, err := reservation.New(w.db, w.table, at).Record(w.t.Context(), reservation.Delivery{Pool: pool, JobID: job, RunID: 1,
		Repository: "acme/app", DeliveryID: fmt.Sprintf("d-%d", job), State: reservation.Queued, Amount: 1, Duration: 10 * time.Minute})
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) sweep() {
	w.t.Helper()
	if _, err := w.sweeper.Handle(w.t.Context(), sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"}); err != nil {
		w.t.Fatalf("sweep: %v", err)
	}
}

// status runs `runnerscaler status args...` against the world and returns its output.
func (w *world) status(args ...string) string {
	w.t.Helper()
	var out bytes.Buffer
	args = append([]string{"-table", w.table, "-pools", w.poolsFile, "-dynamodb-endpoint", testenv.DynamoDBEndpoint(w.t),
		"-kubeconfig", testenv.Kubeconfig(w.t)}, args...)
	if err := runStatus(w.t.Context(), args, &out, &out, func(string) string { return "" }); err != nil {
		w.t.Fatalf("status %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

func (w *world) statefulSets() []string {
	w.t.Helper()
	list, err := w.kube.AppsV1().StatefulSets(w.ns).List(w.t.Context(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names
}

func mustContain(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestStatusShowsASaturatedPoolWithWaitingJobs: three jobs queued 90, 60 and 30 s
// ago in a pool of at most one runner; status shows the pool saturated and each
// job waiting, with its age and the reason.
func TestStatusShowsASaturatedPoolWithWaitingJobs(t *testing.T) {
	w := newWorld(t, `
pools:
  - name: small
    organization: acme
    maxReplicas: 1
    kubernetes: {namespace: %s, image: runner:1}
`, false)
	for i, ago := range []time.Duration{90 * time.Second, 60 * time.Second, 30 * time.Second} {
		w.queue("small", int64(101+i), ago)
	}
	// And a job asking for a self-hosted GPU runner, which no pool has.
	h := webhook.New([]byte("s"), w.pools, reservation.New(w.db, w.table, w.clock))
	gpu := withLabels(t, payload(t, "queued", "", 0), "self-hosted", "gpu")
	if resp := h.Serve(t.Context(), map[string]string{"X-GitHub-Event": "workflow_job", "X-GitHub-Delivery": "d-gpu",
		"X-Hub-Signature-256": sign(gpu, "s")}, gpu); resp.Status != 202 {
		t.Fatalf("unmatched delivery: %d %s", resp.Status, resp.Reason)
	}
	w.sweep()
	out := w.status()
	t.Logf("runnerscaler status:\n%s", out)
	mustContain(t, out, "QUEUED JOBS", "pool at maxReplicas (1): 3 jobs reserve capacity", "101", "102", "103",
		"JOBS NO POOL MATCHED", "289782451", "no matching pool for labels [self-hosted gpu]: no pool's scope covers repository")
	if row := line(out, "small "); !strings.Contains(row, " yes ") || !strings.Contains(row, " 3 ") {
		t.Errorf("pool row %q: want 3 queued and saturated", row)
	}
	var r status.Report
	if err := json.Unmarshal([]byte(w.status("-o", "json")), &r); err != nil {
		t.Fatal(err)
	}
	p := r.Pools[0]
	if !p.Saturated || p.Desired != 1 || len(p.Queued) != 3 {
		t.Fatalf("pool %+v: want saturated, desired 1, 3 queued", p)
	}
	for i, want := range []float64{90, 60, 30} {
		if got := p.Queued[i].AgeSeconds; got < want || got > want+30 {
			t.Errorf("job %d age %.1fs, want %.0fs (plus the test's run time)", p.Queued[i].ID, got, want)
		}
		if !strings.HasPrefix(p.Queued[i].Waiting, "pool at maxReplicas (1)") {
			t.Errorf("job %d waits because %q", p.Queued[i].ID, p.Queued[i].Waiting)
		}
	}
}

// TestStatusShowsWhyARunnerCannotStart: the pool's runner image is not on the
// node and may not be pulled, so the node's real kubelet cannot start the runner
// container; status shows the runner pending with the kubelet's reason, and the
// job waiting on it. (The stack's API server runs without the ServiceAccount
// admission plugin, so a missing service account would not be refused there.)
func TestStatusShowsWhyARunnerCannotStart(t *testing.T) {
	w := newWorld(t, `
pools:
  - name: nopull
    organization: acme
    maxReplicas: 2
    kubernetes:
      namespace: %s
      template:
        spec:
          hostNetwork: true
          containers:
            - name: runner
              image: localhost/runnerscaler/no-such-image:1
              imagePullPolicy: Never
`, true)
	w.queue("nopull", 201, 5*time.Second)
	w.sweep()
	sts := w.statefulSets()
	if len(sts) != 1 {
		t.Fatalf("statefulsets %v, want one runner", sts)
	}
	runner := sts[0] + "-0"
	w.waitWaiting(runner, "ErrImageNeverPull")
	w.clock.Step(time.Second)
	w.sweep() // the pool status records the reason too
	out := w.status()
	t.Logf("runnerscaler status:\n%s", out)
	mustContain(t, out, "RUNNERS HELD UP", runner, "ErrImageNeverPull", "no-such-image")
	pool := w.status("nopull")
	t.Logf("runnerscaler status nopull:\n%s", pool)
	mustContain(t, pool, "RUNNERS", runner, "pending", "ErrImageNeverPull",
		"runner "+runner+" pending: ErrImageNeverPull")
}

// waitWaiting waits until the kubelet reports the pod's runner container waiting for reason.
func (w *world) waitWaiting(pod, reason string) {
	w.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		p, err := w.kube.CoreV1().Pods(w.ns).Get(w.t.Context(), pod, metav1.GetOptions{})
		if err == nil {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Waiting != nil && cs.State.Waiting.Reason == reason {
					return
				}
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	w.t.Fatalf("pod %s: runner container not waiting with %s within two minutes", pod, reason)
}

// TestStatusTracesACompletedJobToItsRunner: real deliveries (GitHub's fixtures,
// the runner fields set to the runner the sweeper created) go through the
// webhook; `status --job` shows the deliveries, the released reservation and the
// runner with its GitHub id and StatefulSet.
func TestStatusTracesACompletedJobToItsRunner(t *testing.T) {
	w := newWorld(t, `
pools:
  - name: hello
    repository: Codertocat/Hello-World
    labels: [ubuntu-latest]
    maxReplicas: 2
    kubernetes:
      namespace: %s
      image: runner:1
      template:
        spec:
          schedulerName: runnerscaler.dev/no-scheduler
`, true)
	const secret = "status-test-secret"
	h := webhook.New([]byte(secret), w.pools, reservation.New(w.db, w.table, w.clock))
	const job = 289782451
	deliver := func(fixture, id, runner string, runnerID int64) {
		t.Helper()
		body := payload(t, fixture, runner, runnerID)
		if resp := h.Serve(t.Context(), map[string]string{"X-GitHub-Event": "workflow_job", "X-GitHub-Delivery": id,
			"X-Hub-Signature-256": sign(body, secret)}, body); resp.Status != 200 {
			t.Fatalf("delivery %s: %d %s", id, resp.Status, resp.Reason)
		}
	}
	deliver("queued", "delivery-q", "", 0)
	w.sweep()
	sts := w.statefulSets()
	if len(sts) != 1 {
		t.Fatalf("statefulsets %v, want one runner", sts)
	}
	runner := runnerpod.PodName(sts[0])
	id := w.jitID(sts[0])
	w.clock.Step(3 * time.Second)
	deliver("in_progress", "delivery-p", runner, id)
	w.clock.Step(5 * time.Second)
	deliver("completed.success.with-organization", "delivery-c", runner, id)

	out := w.status("--job", fmt.Sprint(job))
	t.Logf("runnerscaler status --job %d:\n%s", job, out)
	mustContain(t, out, "completed", "released (job completed)", fmt.Sprintf("%s (GitHub id %d), StatefulSet %s", runner, id, sts[0]),
		"delivery-q", "delivery-p", "delivery-c")
	var tr status.Trace
	if err := json.Unmarshal([]byte(w.status("--job", fmt.Sprint(job), "-o", "json")), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Job.State != "completed" || tr.Active || tr.Runner == nil || tr.Runner.StatefulSet != sts[0] ||
		tr.Job.RunnerID != id || len(tr.Job.Deliveries) != 3 {
		t.Fatalf("trace %+v", tr)
	}
}

func (w *world) jitID(sts string) int64 {
	w.t.Helper()
	s, err := w.kube.AppsV1().StatefulSets(w.ns).Get(w.t.Context(), sts, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var id int64
	if _, err := fmt.Sscan(s.Annotations[runnerpod.AnnotationRunnerID], &id); err != nil || id == 0 {
		w.t.Fatalf("statefulset %s has no runner id: %v", sts, s.Annotations)
	}
	return id
}

// payload is a GitHub fixture with the runner fields set (none: null), its job
// created now (a fixture's own creation time is years old: too old to reserve).
func payload(t *testing.T, fixture, runner string, runnerID int64) []byte {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "internal/webhook/testdata/github-webhooks/workflow_job", fixture+".payload.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	wj := doc["workflow_job"].(map[string]any)
	wj["runner_id"], wj["runner_name"] = nil, nil
	wj["created_at"] = time.Now().UTC().Format(time.RFC3339)
	if runner != "" {
		wj["runner_id"], wj["runner_name"] = runnerID, runner
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func line(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func sign(body []byte, secret string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// withLabels replaces a payload's job labels.
func withLabels(t *testing.T, body []byte, labels ...string) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	doc["workflow_job"].(map[string]any)["labels"] = labels
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStatusShowsDeliveriesGitHubCouldNotGetThrough: GitHub's webhook
// deliveries fail — a 502, then three 401s (the secret differs) — so no
// reservation exists. Before any scheduled sweep, status says the deliveries
// were not checked; after one (the real recoverer reading the GitHub
// simulator's delivery log, recording it in the table), status shows them by
// status, the latest 401 with its hint, and -o json carries the same.
func TestStatusShowsDeliveriesGitHubCouldNotGetThrough(t *testing.T) {
	w := newWorld(t, `
pools:
  - name: small
    organization: acme
    maxReplicas: 1
    kubernetes: {namespace: %s, image: runner:1}
`, false)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	sim := githubsim.New(githubsim.Options{AppID: 7, AppKey: &key.PublicKey, Clock: w.clock})
	apispec.Verify(t, sim)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	answer := 502
	sim.OnDelivery(func(_, _ string, _ []byte) int {
		mu.Lock()
		defer mu.Unlock()
		return answer
	})
	queue := func(status int) {
		mu.Lock()
		answer = status
		mu.Unlock()
		sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"x"}, Duration: time.Second})
		w.clock.Step(time.Second)
	}
	queue(502)
	for range 3 {
		queue(401)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	app, err := githubapi.NewApp(githubapi.Config{BaseURL: srv.URL, Auth: githubapi.Auth{AppID: 7, PrivateKey: keyPEM}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if log, err := app.Deliveries(t.Context(), time.Time{}); err == nil && len(log) >= 4 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("delivery log: %d attempts, %v; want 4", len(log), err)
		}
	}
	mustContain(t, w.status(), "webhook: deliveries not checked yet")

	s, err := sweeper.New(w.pools, reservation.New(w.db, w.table, w.clock), poolstate.NewStore(w.db, w.table),
		w.leases(), nil, w.clock, nil,
		sweeper.Options{Recoverer: redeliver.New(app, w.clock, 0, nil), DeliveryLog: redeliver.NewStore(w.db, w.table)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Handle(t.Context(), sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"}); err != nil {
		t.Fatal(err)
	}
	out := w.status()
	t.Logf("runnerscaler status:\n%s", out)
	mustContain(t, out, "webhook: 4 workflow_job deliveries GitHub could not get through in the last 30m (401 ×3, 502 ×1)",
		"the last check redelivered 1", "queued, 401 — the webhook secret in GitHub differs from the one in Secrets Manager",
		"  502: the function failing or timing out")
	if !strings.HasPrefix(out, "webhook: ") {
		t.Errorf("the webhook line is not first:\n%s", out)
	}
	mustContain(t, w.status("small"), "webhook: 4 workflow_job deliveries")
	var r status.Report
	if err := json.Unmarshal([]byte(w.status("-o", "json")), &r); err != nil {
		t.Fatal(err)
	}
	h := r.Webhook
	if h.State != status.WebhookFailing || h.Failed != 4 || h.ByStatus[401] != 3 || h.ByStatus[502] != 1 || h.Stale ||
		h.Latest == nil || h.Latest.StatusCode != 401 || h.Latest.Action != "queued" || !h.Latest.At.Equal(w.clock.Now().Add(-time.Second)) {
		t.Fatalf("JSON webhook %+v (latest %+v)", h, h.Latest)
	}
}
