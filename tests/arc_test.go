package tests

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/arcimport"
	"github.com/runnerscaler/runnerscaler/internal/arcimport/dryrun"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/teardown"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// arcExamples is ARC's corpus of examples, as internal/arcimport's tests keep it.
const arcExamples = "../internal/arcimport/testdata/arc-manifests/examples/"

func arcSource(t *testing.T, file string) arcimport.Source {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return arcimport.Source{Name: filepath.Base(file), Data: raw}
}

// podSecurityNamespace is a namespace that enforces Pod Security level, as
// infra/rbac.yaml's (baseline) and infra/rbac-docker.yaml's (privileged) do.
func podSecurityNamespace(t *testing.T, kube kubernetes.Interface, level string) string {
	t.Helper()
	ns := testenv.Name("arc-" + level)
	_, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": level}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// TestARCCorpusAdmittedOnTheServer: every example of ARC's corpus that
// converts — alone, and all of them at once — gives pools that load and whose
// runner StatefulSets the API server admits in a server-side dry run, in
// namespaces enforcing Pod Security as infra/ does.
func TestARCCorpusAdmittedOnTheServer(t *testing.T) {
	t.Parallel()
	kube, err := kubernetes.NewForConfig(testenv.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	opts := arcimport.Options{Namespace: podSecurityNamespace(t, kube, "baseline"), DockerNamespace: podSecurityNamespace(t, kube, "privileged")}
	files, err := filepath.Glob(arcExamples + "*.yaml")
	if err != nil || len(files) < 30 {
		t.Fatalf("%d examples (%v)", len(files), err)
	}
	var all []arcimport.Source
	converted := 0
	for _, file := range files {
		src := arcSource(t, file)
		all = append(all, src)
		res, err := arcimport.Convert([]arcimport.Source{src}, opts)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if res.Pools == nil {
			if len(res.Dropped) == 0 {
				t.Errorf("%s: no pool and nothing reported", file)
			}
			continue
		}
		converted++
		admitted(t, file, res.Pools)
	}
	res, err := arcimport.Convert(all, opts)
	if err != nil {
		t.Fatal(err)
	}
	admitted(t, "the whole corpus", res.Pools)
	if converted < 15 || len(res.Names) < 15 {
		t.Fatalf("%d examples converted, %d pools at once: the corpus check proves little", converted, len(res.Names))
	}
}

func admitted(t *testing.T, what string, pools []byte) {
	t.Helper()
	cfg, err := pool.Parse(pools)
	if err != nil {
		t.Errorf("%s: the pools do not load: %v", what, err)
		return
	}
	kube, err := kubernetes.NewForConfig(testenv.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := dryrun.Check(t.Context(), kube, cfg, time.Now()); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// setPodField sets key in the pod spec of every pool's template (replacing its
// value when set), the way an operator edits an imported file for the cluster
// at hand.
func setPodField(t *testing.T, cfg *pool.Config, key string, value *yaml.Node) {
	t.Helper()
	for i := range cfg.Pools {
		spec := mappingValue(&cfg.Pools[i].Kubernetes.Template, "spec")
		if spec == nil {
			t.Fatalf("pool %s: template without spec", cfg.Pools[i].Name)
		}
		if old := mappingValue(spec, key); old != nil {
			*old = *value
			continue
		}
		spec.Content = append(spec.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, value)
	}
}

func scalarNode(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

// arcSideBySide is an ARC RunnerDeployment and RunnerSet in org-a, each with
// its autoscaler, as a team moving to runnerscaler has them.
const arcSideBySide = `apiVersion: actions.summerwind.dev/v1alpha1
kind: RunnerDeployment
metadata: {name: ci}
spec:
  template:
    spec:
      organization: org-a
      labels: [ci-big]
      dockerEnabled: false
---
apiVersion: actions.summerwind.dev/v1alpha1
kind: HorizontalRunnerAutoscaler
metadata: {name: ci}
spec:
  scaleTargetRef: {name: ci}
  minReplicas: 0
  maxReplicas: 3
  scaleUpTriggers: [{githubEvent: {workflowJob: {}}, duration: 30m}]
---
apiVersion: actions.summerwind.dev/v1alpha1
kind: RunnerSet
metadata: {name: builds}
spec:
  organization: org-a
  labels: [builds]
  dockerEnabled: false
  selector: {matchLabels: {app: builds}}
  serviceName: builds
  template:
    metadata: {labels: {app: builds}}
    spec:
      schedulerName: runnerscaler.dev/no-scheduler
---
apiVersion: actions.summerwind.dev/v1alpha1
kind: HorizontalRunnerAutoscaler
metadata: {name: builds}
spec:
  scaleTargetRef: {kind: RunnerSet, name: builds}
  minReplicas: 0
  maxReplicas: 2
  scaleUpTriggers: [{githubEvent: {}, duration: 30m}]
`

// TestARCRunnersSideBySide: during a move, ARC's runners and runnerscaler's
// share organization org-a, their labels, and their deployments' names. ARC's
// are registered as ARC names them — a RunnerDeployment's
// `<deployment>-<replicaset hash>-<random>`, a RunnerSet's
// `<runnerset>-<random>-0` — one of them busy. runnerscaler's sweeps, their
// cleanup and a whole teardown create, count, stop and remove only
// runnerscaler's own runners; ARC's stay registered and as they were, and the
// teardown's look for runners left on GitHub does not take ARC's for its own
// (the pool imported from the RunnerSet is named builds-pool: a runner named
// like a pool's, <pool>-xxxxx-0, would be taken for one).
func TestARCRunnersSideBySide(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	res, err := arcimport.Convert([]arcimport.Source{{Name: "arc.yaml", Data: []byte(arcSideBySide)}},
		arcimport.Options{Namespace: d.ns, DockerNamespace: d.ns, RunnerImage: "runner:1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) > 0 || !slices.Equal(res.Names, []string{"builds-pool", "ci"}) {
		t.Fatalf("pools %v, not carried %v: want builds-pool and ci, everything carried", res.Names, res.Dropped)
	}
	cfg, err := pool.Parse(res.Pools)
	if err != nil {
		t.Fatal(err)
	}
	setPodField(t, cfg, "schedulerName", scalarNode("runnerscaler.dev/no-scheduler")) // the test plays the kubelet
	arc := map[string]githubsim.Runner{}
	for _, r := range []struct {
		name   string
		labels []string
		busy   bool
	}{{"ci-xkq7c-b2n4z", []string{"ci-big"}, false}, {"ci-xkq7c-hzp2t", []string{"ci-big"}, true}, {"builds-wx5tq-0", []string{"builds"}, false}} {
		arc[r.name] = d.arcRunner(r.name, r.labels, r.busy)
	}

	s := d.sweeper(cfg)
	d.queue("ci", "builds-pool")
	d.tick(s)
	ours := d.runners()
	if len(ours["ci"]) != 1 || len(ours["builds-pool"]) != 1 {
		t.Fatalf("runners %v, want one of each pool: ARC's idle runners are not counted as ours", ours)
	}
	for p, names := range ours {
		r := d.start(names[0], "organization/org-a")
		if !runnername.IsPodOf(p, r.Name) {
			t.Fatalf("our runner %s is not named like pool %s's", r.Name, p)
		}
		d.exit(names[0], r.ID)
	}
	d.tick(s)
	d.tick(s)

	var out strings.Builder
	drainer := teardown.New(inProcess{s}, clock.RealClock{}, &out)
	drainer.Interval = 200 * time.Millisecond
	drainer.GitHub = teardown.NewRegistrations(d.gh, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := drainer.Drain(ctx); err != nil {
		t.Fatalf("drain: %v\n%s", err, out.String())
	}
	var left []string
	for _, l := range d.leftovers(t.Context()) {
		if !strings.HasPrefix(l, "github/") {
			left = append(left, l)
		}
	}
	if len(left) > 0 {
		t.Fatalf("left in the cluster after the drain: %v", left)
	}
	for name, was := range arc {
		now, ok := d.sim.Runner(was.ID)
		if !ok || now.Name != name || now.Busy != was.Busy || !now.Online {
			t.Errorf("ARC's runner %s: %+v (registered %v), want it as it was: %+v", name, now, ok, was)
		}
	}
	if got := len(d.sim.Runners()); got != len(arc) {
		t.Errorf("%d runners on GitHub after the drain, want ARC's %d only", got, len(arc))
	}
	// The look for runners left on GitHub goes by name only: a runner named
	// like a pool's would be taken for one, which is why an imported
	// RunnerSet's pool is not named like the RunnerSet.
	d.arcRunner("ci-bcdfg-0", nil, false)
	if left, err := teardown.NewRegistrations(d.gh, cfg).Left(t.Context()); err != nil || len(left) != 1 || !strings.Contains(left[0], "ci-bcdfg-0") {
		t.Errorf("runners left on GitHub %v (%v), want only ci-bcdfg-0, named like pool ci's", left, err)
	}
}

// arcRunner registers a runner as ARC's controller does (a registration
// token, ARC's labels), online, and busy when asked.
func (d *deployment) arcRunner(name string, labels []string, busy bool) githubsim.Runner {
	d.t.Helper()
	const sc = "organization/org-a"
	tok, err := d.gh.RegistrationToken(d.t.Context(), scope.Scope{Organization: "org-a"})
	if err != nil {
		d.t.Fatal(err)
	}
	r, err := d.sim.Register(githubsim.Registration{Token: tok.Token, Scope: sc, Name: name, Labels: labels, Ephemeral: true})
	if err != nil {
		d.t.Fatal(err)
	}
	if busy {
		if err := d.sim.SetBusy(r.ID, true); err != nil {
			d.t.Fatal(err)
		}
		r.Busy = true
	}
	return r
}

// TestARCImportServesAJobInTheClosedLoop: ARC's v0.22 acceptance
// RunnerDeployment and its autoscaler (githubEvent: {}, v0.22's workflow_job
// trigger), imported with runnerscaler's runner image, serve jobs of its
// repository in the closed loop: real runner pods on the node, the GitHub
// simulator, the webhook and the sweeper. Two edits fit the file to the local
// node, as an operator fits it to a cluster: host networking (runners reach
// the simulator on 127.0.0.1) and no docker sidecar (the node has no
// docker:dind image and no registry).
func TestARCImportServesAJobInTheClosedLoop(t *testing.T) {
	t.Parallel()
	img := image(t)
	db, table := testenv.Table(t)
	kube, ns := testenv.Namespace(t)
	res, err := arcimport.Convert([]arcimport.Source{arcSource(t, arcExamples+"04-acceptance-v022-repo-runnerdeploy-hra.yaml")},
		arcimport.Options{Namespace: ns, DockerNamespace: ns, RunnerImage: img})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) > 0 {
		t.Fatalf("not carried: %v", res.Dropped)
	}
	cfg, err := pool.Parse(res.Pools)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Pool("repo-runnerdeploy")
	if p == nil || p.Repository != "example/myrepo" || p.MinReplicas != 1 || p.Max() != 10 || !p.Kubernetes.DockerEnabled {
		t.Fatalf("pool %+v: want ARC's repository, min 1, max 10, docker", p)
	}
	p.Kubernetes.DockerEnabled = false
	setPodField(t, cfg, "hostNetwork", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	setPodField(t, cfg, "dnsPolicy", scalarNode("Default"))
	logger, logs := debugLog(t)
	l, err := loop.Start(t.Context(), loop.Options{Pools: cfg, DB: db, Table: table, Kube: kube, Log: logger})
	if err != nil {
		t.Fatal(err)
	}
	apispec.Verify(t, l.Sim)
	t.Cleanup(func() { releasePods(kube, ns) })
	t.Cleanup(l.Stop)
	w := &world{t: t, loop: l, kube: kube, ns: ns, cfg: cfg, image: img, logs: logs}
	for range 2 {
		l.Sim.QueueJob(githubsim.JobSpec{Repository: "example/myrepo", Organization: "example", Labels: []string{"self-hosted"}, Duration: time.Second})
	}
	w.waitFor("both jobs completed", 3*time.Minute, func() bool { return allDone(l.Sim.Jobs()) })
	for _, j := range l.Sim.Jobs() {
		if j.Conclusion != githubsim.JobSuccess || !runnername.IsPodOf("repo-runnerdeploy", j.RunnerName) {
			t.Errorf("job %d: %s on %s, want success on a repo-runnerdeploy runner", j.ID, j.Conclusion, j.RunnerName)
		}
	}
	w.noViolations()
}

// arcScaleSetValues is a gha-runner-scale-set release's values in org-a, as
// `helm get values` prints them.
const arcScaleSetValues = `githubConfigUrl: https://github.com/org-a
githubConfigSecret: arc-secret
runnerScaleSetName: arc-runner-set
minRunners: 0
maxRunners: 2
`

// TestARCScaleSetRunnersSideBySide: during a move from a runner scale set,
// ARC's scale-set runners and the pool imported from it share organization
// org-a, the scale set's name (the pool's) and its label. ARC's are
// registered as ARC names them, `<scale set>-<random>-runner-<random>`, with
// the scale set's name as their label, one of them busy. runnerscaler's
// sweeps, a runner's whole life and a teardown create, count, stop and remove
// only runnerscaler's own runners (`<pool>-xxxxx-0`); ARC's stay registered,
// online and as busy as they were, and the teardown's look for runners left on
// GitHub does not take them for its own.
func TestARCScaleSetRunnersSideBySide(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	res, err := arcimport.Convert([]arcimport.Source{{Name: "values.yaml", Data: []byte(arcScaleSetValues)}},
		arcimport.Options{Namespace: d.ns, DockerNamespace: d.ns, RunnerImage: "runner:1"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Names, []string{"arc-runner-set"}) {
		t.Fatalf("pools %v, not carried %v: want arc-runner-set", res.Names, res.Dropped)
	}
	cfg, err := pool.Parse(res.Pools)
	if err != nil {
		t.Fatal(err)
	}
	setPodField(t, cfg, "schedulerName", scalarNode("runnerscaler.dev/no-scheduler")) // the test plays the kubelet
	arc := map[string]githubsim.Runner{}
	for _, r := range []struct {
		name string
		busy bool
	}{{"arc-runner-set-7xk2p-runner-bq4zd", false}, {"arc-runner-set-7xk2p-runner-w9c5t", true}, {"arc-runner-set-m4n8v-runner-h2j6k", false}} {
		arc[r.name] = d.arcRunner(r.name, []string{"arc-runner-set"}, r.busy)
	}

	s := d.sweeper(cfg)
	d.queue("arc-runner-set")
	d.tick(s)
	ours := d.runners()
	if len(ours["arc-runner-set"]) != 1 {
		t.Fatalf("runners %v, want one of the pool: ARC's idle runners with its label are not counted as ours", ours)
	}
	r := d.start(ours["arc-runner-set"][0], "organization/org-a")
	if !runnername.IsPodOf("arc-runner-set", r.Name) {
		t.Fatalf("our runner %s is not named like the pool's", r.Name)
	}
	d.exit(ours["arc-runner-set"][0], r.ID)
	d.tick(s)
	d.tick(s)

	var out strings.Builder
	drainer := teardown.New(inProcess{s}, clock.RealClock{}, &out)
	drainer.Interval = 200 * time.Millisecond
	drainer.GitHub = teardown.NewRegistrations(d.gh, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := drainer.Drain(ctx); err != nil {
		t.Fatalf("drain: %v\n%s", err, out.String())
	}
	for name, was := range arc {
		now, ok := d.sim.Runner(was.ID)
		if !ok || now.Name != name || now.Busy != was.Busy || !now.Online {
			t.Errorf("ARC's runner %s: %+v (registered %v), want it as it was: %+v", name, now, ok, was)
		}
	}
	if got := len(d.sim.Runners()); got != len(arc) {
		t.Errorf("%d runners on GitHub after the drain, want ARC's %d only", got, len(arc))
	}
	if left, err := teardown.NewRegistrations(d.gh, cfg).Left(t.Context()); err != nil || len(left) != 0 {
		t.Errorf("runners left on GitHub %v (%v), want none: ARC's scale-set runners are not named like the pool's", left, err)
	}
}

// TestARCScaleSetServesJobsInTheClosedLoop: the gha-runner-scale-set chart's
// default values, with a githubConfigUrl (and the Helm release's name, which
// names the scale set), imported with runnerscaler's runner image, serve the
// jobs whose runs-on names the scale set, in the closed loop: real runner pods
// on the node, the GitHub simulator, the webhook and the sweeper, with no
// violation. The edits an operator makes for the cluster at hand: host
// networking (runners reach the simulator on 127.0.0.1) and a ceiling
// (the chart sets none; the import writes minRunners, at least 1, and lists it).
func TestARCScaleSetServesJobsInTheClosedLoop(t *testing.T) {
	t.Parallel()
	img := image(t)
	db, table := testenv.Table(t)
	kube, ns := testenv.Namespace(t)
	values, err := os.ReadFile("../internal/arcimport/testdata/arc-scale-sets/values/00-chart-default-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	values = []byte(strings.Replace(string(values), `githubConfigUrl: ""`, `githubConfigUrl: "https://github.com/example"`, 1))
	res, err := arcimport.Convert([]arcimport.Source{{Name: "values.yaml", Data: values}},
		arcimport.Options{Namespace: ns, DockerNamespace: ns, RunnerImage: img, Release: "arc-runner-set"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := arcimport.Check(res.Pools)
	if err != nil {
		t.Fatalf("%v; not carried: %v", err, res.Dropped)
	}
	p := cfg.Pool("arc-runner-set")
	if p == nil || p.Organization != "example" || !slices.Equal(p.Labels, []string{"arc-runner-set"}) || p.MinReplicas != 0 || p.Kubernetes.DockerEnabled {
		t.Fatalf("pool %+v: want organization example, label arc-runner-set, min 0, no docker", p)
	}
	two := 2
	p.MaxReplicas = &two
	setPodField(t, cfg, "hostNetwork", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	setPodField(t, cfg, "dnsPolicy", scalarNode("Default"))
	logger, logs := debugLog(t)
	l, err := loop.Start(t.Context(), loop.Options{Pools: cfg, DB: db, Table: table, Kube: kube, Log: logger})
	if err != nil {
		t.Fatal(err)
	}
	apispec.Verify(t, l.Sim)
	t.Cleanup(func() { releasePods(kube, ns) })
	t.Cleanup(l.Stop)
	w := &world{t: t, loop: l, kube: kube, ns: ns, cfg: cfg, image: img, logs: logs}
	for range 3 {
		l.Sim.QueueJob(githubsim.JobSpec{Repository: "example/myrepo", Organization: "example", Labels: []string{"arc-runner-set"}, Duration: time.Second})
	}
	w.waitFor("the jobs completed", 3*time.Minute, func() bool { return allDone(l.Sim.Jobs()) })
	for _, j := range l.Sim.Jobs() {
		if j.Conclusion != githubsim.JobSuccess || !runnername.IsPodOf("arc-runner-set", j.RunnerName) {
			t.Errorf("job %d: %s on %s, want success on an arc-runner-set runner", j.ID, j.Conclusion, j.RunnerName)
		}
	}
	w.noViolations()
}
