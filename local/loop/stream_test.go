package loop

import (
	"slices"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// TestContainerJobs: every nth job becomes a container job with a service on
// the container pools in turn (their labels and scope), its script
// ContainerScript then the one it had; the other jobs are left as they were.
func TestContainerJobs(t *testing.T) {
	cfg, err := pool.Parse([]byte(`
pools:
  - name: plain
    organization: acme
    labels: [plain]
    maxReplicas: 1
    kubernetes: {namespace: r, image: r}
  - name: cmk
    repository: other/repo
    labels: [cmk]
    maxReplicas: 1
    kubernetes: {namespace: r, image: r}
  - name: cmn
    organization: beta
    labels: [cmn]
    maxReplicas: 1
    kubernetes: {namespace: r, image: r}
`))
	if err != nil {
		t.Fatal(err)
	}
	plain := &pool.Config{Pools: cfg.Pools[:1]}
	jobs := FailEvery(Generate(plain, 9, 10, time.Second, time.Second, 1), 6)
	got := ContainerJobs(slices.Clone(jobs), 3, []*pool.Pool{&cfg.Pools[1], &cfg.Pools[2]}, "img")
	for i, j := range got {
		if (i+1)%3 != 0 {
			if j.Container != nil || !slices.Equal(j.Labels, []string{"self-hosted", "plain"}) || j.Script != jobs[i].Script {
				t.Errorf("job %d: %+v, want it left as it was", i, j)
			}
			continue
		}
		want := map[int]struct {
			repo, org, label, script string
		}{
			2: {"other/repo", "", "cmk", ContainerScript},
			5: {"beta/app", "beta", "cmn", ContainerScript + "\n" + FailingScript},
			8: {"other/repo", "", "cmk", ContainerScript},
		}[i]
		if j.Container == nil || j.Container.Image != "img" || len(j.Services) != 1 || j.Services[0].Image != "img" ||
			j.Repository != want.repo || j.Organization != want.org || !slices.Equal(j.Labels, []string{"self-hosted", want.label}) ||
			j.Script != want.script || j.At != jobs[i].At || j.Duration != jobs[i].Duration {
			t.Errorf("job %d: %+v, want a container job of %+v at %s", i, j, want, jobs[i].At)
		}
	}
}
