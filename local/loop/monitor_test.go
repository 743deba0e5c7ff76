package loop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// monitorPools: an ephemeral pool and a persistent one, in namespace %s.
const monitorPools = `
pools:
  - name: small
    organization: acme
    labels: [small]
    maxReplicas: 2
    kubernetes: {namespace: %[1]s, image: r}
  - name: keep
    organization: acme
    labels: [keep]
    ephemeral: false
    maxReplicas: 2
    kubernetes: {namespace: %[1]s, image: r}
`

// simWithRunner is a simulator serving a PAT, and a function that registers an
// online acme runner and has it take a queued job.
func simWithRunner(t *testing.T) (*githubsim.Server, string, func(name string) (githubsim.Runner, githubsim.Job)) {
	t.Helper()
	sim := githubsim.New(githubsim.Options{PATs: []string{"pat"}})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	call := func(method, path string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "token pat")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	take := func(name string) (githubsim.Runner, githubsim.Job) {
		t.Helper()
		resp := call("POST", "/orgs/acme/actions/runners/registration-token")
		var tok struct{ Token string }
		if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != 201 {
			t.Fatalf("registration token: %d %v", resp.StatusCode, err)
		}
		rn, err := sim.Register(githubsim.Registration{Token: tok.Token, Scope: scope.Scope{Organization: "acme"}.String(), Name: name,
			Labels: []string{"small"}, Ephemeral: true})
		if err != nil {
			t.Fatal(err)
		}
		sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted", "small"}, Duration: time.Minute})
		j, ok, err := sim.AcquireJob(rn.ID)
		if err != nil || !ok {
			t.Fatalf("AcquireJob: %v %v", ok, err)
		}
		return rn, j
	}
	return sim, srv.URL, take
}

// testLoop is a loop around sim with the pools of monitorPools in namespace
// "ns", and no server behind its Kubernetes client (the monitor's look at a
// failed container's output then logs that it found none).
func testLoop(t *testing.T, sim *githubsim.Server) *Loop {
	t.Helper()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	return testLoopIn(t, sim, kube, "ns")
}

// testLoopIn is testLoop with the pools in namespace ns of kube.
func testLoopIn(t *testing.T, sim *githubsim.Server, kube kubernetes.Interface, ns string) *Loop {
	t.Helper()
	cfg, err := pool.Parse(fmt.Appendf(nil, monitorPools, ns))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	l := &Loop{Sim: sim, Monitor: newMonitor(log), opts: Options{Kube: kube, Log: log}, shortSince: map[string]time.Time{}}
	l.pools.Store(cfg)
	return l
}

// removeWhileRESTSaysIdle removes runner id, which runs a job, through the REST
// API while its busy flag says idle: 204, and the job is lost.
func removeWhileRESTSaysIdle(t *testing.T, sim *githubsim.Server, url string, id int64) {
	t.Helper()
	if err := sim.SetRESTBusy(id, false); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), "DELETE", url+"/orgs/acme/actions/runners/"+strconv.FormatInt(id, 10), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token pat")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("DELETE while REST says idle: %d, want 204", resp.StatusCode)
	}
}

// TestLostJobIsAViolationEvenWithAFault: a job the simulator failed because its
// runner's registration was removed while it ran (DELETE while REST said idle)
// is a violation although a fault hit that runner's pod, and is counted; a job
// that failed otherwise on a runner hit by a fault stays excused.
func TestLostJobIsAViolationEvenWithAFault(t *testing.T) {
	t.Parallel()
	sim, url, take := simWithRunner(t)
	removed, lostJob := take("small-a")
	removeWhileRESTSaysIdle(t, sim, url, removed.ID)
	_, failedJob := take("small-b")
	if err := sim.CompleteJobAs(failedJob.ID, githubsim.JobFailure); err != nil {
		t.Fatal(err)
	}

	l := testLoop(t, sim)
	l.Monitor.Fault("small-a", "runner process killed")
	l.Monitor.Fault("small-b", "runner process killed")
	for range 2 { // judged once, however often the jobs are looked at
		l.judgeJobs(sim.Jobs())
	}
	v := l.Monitor.Violations()
	if len(v) != 1 || !strings.Contains(v[0], "job "+strconv.FormatInt(lostJob.ID, 10)+" lost") || !strings.Contains(v[0], "small-a") {
		t.Fatalf("violations %q, want the lost job %d alone", v, lostJob.ID)
	}
	if n := l.Monitor.JobsLostToRemoval(); n != 1 {
		t.Fatalf("JobsLostToRemoval = %d, want 1", n)
	}
	if ex := l.Monitor.Excused(); len(ex) != 1 || !strings.Contains(ex[0], "job "+strconv.FormatInt(failedJob.ID, 10)+" on runner small-b ended failure") {
		t.Fatalf("excused %q, want the failed job %d alone", ex, failedJob.ID)
	}
}

// TestJobWhoseRunnerDiedFirstIsNotLostToRemoval: a job's runner container was
// OOM-killed under it, and only then was its registration removed: the job was
// lost with its runner's process, so it is judged as such (excused by the fault
// on that pod), not counted against the product's removal. A container stop seen
// after the removal (the runner exiting because it was removed) excuses nothing.
func TestJobWhoseRunnerDiedFirstIsNotLostToRemoval(t *testing.T) {
	t.Parallel()
	sim, url, take := simWithRunner(t)
	l := testLoop(t, sim)
	dead, deadJob := take("small-a")
	l.Monitor.Fault("small-a", "OOM kill")
	l.Monitor.mu.Lock()
	l.Monitor.stopSeen["small-a"] = []time.Time{time.Now()} // the container was seen stopping under its job
	l.Monitor.mu.Unlock()
	removeWhileRESTSaysIdle(t, sim, url, dead.ID)
	l.Monitor.mu.Lock()
	// Restarted by the kubelet, it stops again after the removal: the stop under
	// the job still counts.
	l.Monitor.stopSeen["small-a"] = append(l.Monitor.stopSeen["small-a"], time.Now())
	l.Monitor.mu.Unlock()
	alive, aliveJob := take("small-b")
	removeWhileRESTSaysIdle(t, sim, url, alive.ID)
	l.Monitor.mu.Lock()
	l.Monitor.stopSeen["small-b"] = []time.Time{time.Now()} // it exits because it was removed
	l.Monitor.mu.Unlock()
	l.judgeJobs(sim.Jobs())
	if n := l.Monitor.JobsLostToRemoval(); n != 1 {
		t.Fatalf("JobsLostToRemoval = %d, want 1 (job %d)", n, aliveJob.ID)
	}
	if v := l.Monitor.Violations(); len(v) != 1 || !strings.Contains(v[0], "job "+strconv.FormatInt(aliveJob.ID, 10)+" lost") {
		t.Fatalf("violations %q, want job %d lost alone", v, aliveJob.ID)
	}
	if ex := l.Monitor.Excused(); len(ex) != 1 || !strings.Contains(ex[0], "job "+strconv.FormatInt(deadJob.ID, 10)+" on runner small-a ended failure") {
		t.Fatalf("excused %q, want job %d, whose runner died first", ex, deadJob.ID)
	}
}

// TestPodDeletedUnderAJob: a runner pod deleted under a job that just started —
// handed over as the sweeper stopped the idle runner, too young for any busy
// signal — is counted, not a violation; under an older job it is a violation.
func TestPodDeletedUnderAJob(t *testing.T) {
	t.Parallel()
	sim, _, take := simWithRunner(t)
	l := testLoop(t, sim)
	take("small-a")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "small-a", UID: "u1"}}
	l.judgeDeletion(pod)
	if n, v := l.Monitor.Handovers(), l.Monitor.Violations(); n != 1 || len(v) != 0 {
		t.Fatalf("a young job: %d handovers, violations %q; want 1 and none", n, v)
	}
	l.Monitor.handover = 0 // every job is older than that
	l.judgeDeletion(pod)
	if v := l.Monitor.Violations(); len(v) != 1 || !strings.Contains(v[0], "deleted while its runner ran job") {
		t.Fatalf("an older job: violations %q, want the deletion", v)
	}
}

// TestBusySignalMetricsSumsTheSweepersRecords: the loop's EMF sink sums every
// RemovalsVetoedBy... field and BusySignalDisagreements over the records, lines
// split across writes included, and ignores the other fields.
func TestBusySignalMetricsSumsTheSweepersRecords(t *testing.T) {
	t.Parallel()
	sums := newMetricSums()
	w, err := emf.NewWriter(sums, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 3 {
		if err := w.Write(emf.Record{Time: now, Dimensions: map[string]string{"Pool": "p" + strconv.Itoa(i)}, Metrics: []emf.Metric{
			{Name: "Desired", Unit: emf.Count, Value: 5},
			{Name: "RemovalsVetoedByGitHub", Unit: emf.Count, Value: 2},
			{Name: "RemovalsVetoedByJobLink", Unit: emf.Count, Value: float64(i)},
			{Name: "BusySignalDisagreements", Unit: emf.Count, Value: 1},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	var line bytes.Buffer
	w2, err := emf.NewWriter(&line, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Write(emf.Record{Time: now, Metrics: []emf.Metric{{Name: "RemovalsVetoedByPodReport", Unit: emf.Count, Value: 4}}}); err != nil {
		t.Fatal(err)
	}
	raw := line.Bytes()
	for _, part := range [][]byte{raw[:10], raw[10:]} {
		if _, err := sums.Write(part); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]float64{"RemovalsVetoedByGitHub": 6, "RemovalsVetoedByJobLink": 3, "BusySignalDisagreements": 3, "RemovalsVetoedByPodReport": 4}
	if got := sums.snapshot(); !maps.Equal(got, want) || sums.bad != 0 {
		t.Fatalf("sums %v (%d bad lines), want %v", got, sums.bad, want)
	}
}

// TestScaledBusyLie: GitHub's lie (a lag of 25–60 s, busy: false 5 s a minute)
// scaled by the sweep period against AWS's minute, and valid.
func TestScaledBusyLie(t *testing.T) {
	t.Parallel()
	gh := ScaledBusyLie(time.Minute, 1)
	if gh.MinLag != 25*time.Second || gh.MaxLag != time.Minute || gh.FlickerEvery != time.Minute || gh.FlickerFor != 5*time.Second {
		t.Fatalf("at a one-minute schedule: %+v, want GitHub's", gh)
	}
	fast := ScaledBusyLie(time.Second, 1)
	if fast.MinLag != 25*time.Second/60 || fast.MaxLag != time.Second || fast.FlickerEvery != time.Second || fast.FlickerFor != 5*time.Second/60 {
		t.Fatalf("at a one-second schedule: %+v", fast)
	}
	for _, l := range []*githubsim.BusyLie{gh, fast} {
		if err := l.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}
