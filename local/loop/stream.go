package loop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TraceJob is one job of a trace: when it is queued (after the start), where, what
// it asks for and how long it runs.
type TraceJob struct {
	At           time.Duration `yaml:"at"`
	Repository   string        `yaml:"repository"`
	Organization string        `yaml:"organization"`
	Enterprise   string        `yaml:"enterprise"`
	Labels       []string      `yaml:"labels"`
	Duration     time.Duration `yaml:"duration"`
	// Script, when set, is what the job runs (githubsim.JobSpec.Script): e.g.
	// `exit 1` for a job that fails by itself.
	Script string `yaml:"script"`
	// Container and Services, when set, make it a container job
	// (githubsim.JobSpec.Container, Services): on a pool in container mode,
	// its Script runs in a workflow pod (see ContainerJobs).
	Container *githubsim.JobContainer  `yaml:"container"`
	Services  []githubsim.JobContainer `yaml:"services"`
}

// ContainerScript is what ContainerJobs puts before a container job's
// script: it names the host the script ran in, which in a workflow pod is
// the pod's name (runnerpod.WorkflowPodName of its runner), so that a check
// can tell a script run in the job container from one run on the runner.
const ContainerScript = `echo "ran in $(cat /etc/hostname)"`

// ContainerJobs makes every nth job of jobs (n > 0) a container job with a
// service, both of image, for the pools in turn (their scope and labels):
// its script is ContainerScript, then the script it had (a job that fails by
// itself keeps failing, now in its job container).
func ContainerJobs(jobs []TraceJob, n int, pools []*pool.Pool, image string) []TraceJob {
	for k, i := 0, n-1; i < len(jobs) && len(pools) > 0; k, i = k+1, i+n {
		p := pools[k%len(pools)]
		j := &jobs[i]
		j.Labels = append([]string{"self-hosted"}, p.Labels...)
		j.Repository, j.Organization, j.Enterprise = repositoryOf(p)
		j.Script = strings.TrimSuffix(ContainerScript+"\n"+j.Script, "\n")
		j.Container = &githubsim.JobContainer{Image: image}
		j.Services = []githubsim.JobContainer{{Image: image}}
	}
	return jobs
}

// repositoryOf is a repository in p's scope, and its organization and
// enterprise as a job of it names them.
func repositoryOf(p *pool.Pool) (repository, organization, enterprise string) {
	sc := p.Scope()
	switch {
	case sc.Repository != "":
		return sc.Repository, "", ""
	case sc.Organization != "":
		return sc.Organization + "/app", sc.Organization, ""
	default:
		return "someone/app", "", sc.Enterprise
	}
}

// FailingScript is the script of the jobs FailEvery makes fail by themselves.
const FailingScript = "echo 'this job fails by itself'; exit 1"

// FailEvery makes every nth job of jobs (n > 0) one that fails by itself: its
// script exits 1 on a runner that stays alive.
func FailEvery(jobs []TraceJob, n int) []TraceJob {
	for i := n - 1; i < len(jobs); i += n {
		jobs[i].Script = FailingScript
	}
	return jobs
}

// LoadTrace reads a YAML (or JSON) list of jobs; durations are Go durations ("2s").
func LoadTrace(path string) ([]TraceJob, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading trace: %w", err)
	}
	var jobs []TraceJob
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&jobs); err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	for i, j := range jobs {
		if j.Repository == "" || len(j.Labels) == 0 || j.Duration <= 0 {
			return nil, fmt.Errorf("trace %s: job %d needs repository, labels and a positive duration", path, i)
		}
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].At < jobs[b].At })
	return jobs, nil
}

// Generate makes n jobs arriving as a Poisson process of rate per second, each for
// a random pool (its scope and labels), running between minD and maxD.
func Generate(cfg *pool.Config, n int, rate float64, minD, maxD time.Duration, seed uint64) []TraceJob {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var at time.Duration
	jobs := make([]TraceJob, 0, n)
	for range n {
		at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		p := &cfg.Pools[rng.IntN(len(cfg.Pools))]
		j := TraceJob{At: at, Labels: append([]string{"self-hosted"}, p.Labels...),
			Duration: minD + time.Duration(rng.Int64N(int64(maxD-minD)+1))}
		j.Repository, j.Organization, j.Enterprise = repositoryOf(p)
		jobs = append(jobs, j)
	}
	return jobs
}

// Play queues the trace's jobs at their times (relative to now) until ctx ends.
func (l *Loop) Play(ctx context.Context, jobs []TraceJob) {
	start := time.Now()
	for _, j := range jobs {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(j.At))):
		}
		l.Sim.QueueJob(githubsim.JobSpec{Repository: j.Repository, Organization: j.Organization, Enterprise: j.Enterprise,
			Labels: j.Labels, Duration: j.Duration, Script: j.Script, Container: j.Container, Services: j.Services})
	}
}

// PoolStats is what the live view shows of one pool.
type PoolStats struct {
	Pool                  string
	Queued, Running, Done int
	Desired               int
	Phases                map[string]int
	// Stuck names the runners that are not running, by why (the last sweep's view).
	Stuck            map[string]string
	WaitP50, WaitP95 time.Duration
}

// Stats summarises the jobs (routed to pools as the webhook routes them) and each
// pool's last status.
func (l *Loop) Stats(ctx context.Context) []PoolStats {
	byPool := map[string]*PoolStats{}
	waits := map[string][]time.Duration{}
	for i := range l.Pools().Pools {
		name := l.Pools().Pools[i].Name
		byPool[name] = &PoolStats{Pool: name}
	}
	for _, j := range l.Sim.Jobs() {
		p, _ := l.Pools().Route(pool.Job{Repository: j.Repository, Organization: j.Organization, Enterprise: j.Enterprise, Labels: j.Labels}, l.admits)
		if p == nil {
			continue
		}
		s := byPool[p.Name]
		switch j.State {
		case githubsim.JobQueued:
			s.Queued++
		case githubsim.JobInProgress:
			s.Running++
		default:
			s.Done++
		}
		if !j.StartedAt.IsZero() {
			waits[p.Name] = append(waits[p.Name], j.StartedAt.Sub(j.QueuedAt))
		}
	}
	out := make([]PoolStats, 0, len(byPool))
	for i := range l.Pools().Pools {
		s := byPool[l.Pools().Pools[i].Name]
		if st, err := l.status.Get(ctx, s.Pool); err == nil {
			s.Desired, s.Phases, s.Stuck = st.Desired, st.Phases, st.Stuck
		}
		s.WaitP50, s.WaitP95 = percentile(waits[s.Pool], 50), percentile(waits[s.Pool], 95)
		out = append(out, *s)
	}
	return out
}

// Waits returns every started job's wait (queued → in progress).
func (l *Loop) Waits() []time.Duration {
	var ws []time.Duration
	for _, j := range l.Sim.Jobs() {
		if !j.StartedAt.IsZero() {
			ws = append(ws, j.StartedAt.Sub(j.QueuedAt))
		}
	}
	return ws
}

// Percentile of durations (0 for none).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// Percentile is exported for the benchmarks and the summary.
func Percentile(ds []time.Duration, p int) time.Duration { return percentile(ds, p) }
