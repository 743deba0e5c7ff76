package pool_test

import (
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

const routing = `
pools:
  - name: ent
    enterprise: acme-corp
    labels: [linux-big]
    maxReplicas: 1
    kubernetes: {namespace: ns, image: r}
  - name: org-gpu
    organization: Acme
    labels: [GPU]
    maxReplicas: 1
    kubernetes: {namespace: ns, image: r}
  - name: org-any
    organization: acme
    maxReplicas: 1
    kubernetes: {namespace: ns, image: r}
  - name: repo
    repository: acme/app
    labels: [fast]
    arch: arm64
    maxReplicas: 1
    kubernetes: {namespace: ns, image: r}
`

func TestRoute(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(routing))
	if err != nil {
		t.Fatal(err)
	}
	job := func(labels ...string) pool.Job {
		return pool.Job{Repository: "acme/app", Organization: "acme", Enterprise: "acme-corp", Labels: labels}
	}
	cases := []struct {
		name string
		job  pool.Job
		want string // pool name, or "" with wantWhy in the reason
		why  string
	}{
		{"repository pool first", job("self-hosted", "fast"), "repo", ""},
		{"implied labels of the repository pool", job("self-hosted", "Linux", "ARM64"), "repo", ""},
		{"falls to the organization (file order) when labels do not fit the repository pool", job("self-hosted", "x64"), "org-gpu", ""},
		{"skips an organization pool lacking a label", job("self-hosted", "linux-big"), "ent", ""},
		{"file order within a scope", job("self-hosted"), "repo", ""},
		{"case-insensitive labels and scope", pool.Job{Repository: "ACME/other", Organization: "ACME", Labels: []string{"Self-Hosted", "gpu"}}, "org-gpu", ""},
		{"enterprise last", job("linux-big"), "ent", ""},
		{"no label fits", job("self-hosted", "windows"), "", "none has every label"},
		{"no scope fits", pool.Job{Repository: "other/app", Organization: "other", Labels: []string{"self-hosted"}}, "", "no pool's scope covers"},
		{"user repository under an enterprise pool with no org", pool.Job{Repository: "someone/app", Enterprise: "acme-corp", Labels: []string{"linux-big"}}, "ent", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, why := cfg.Route(tc.job)
			switch {
			case tc.want == "" && p != nil:
				t.Fatalf("routed to %s, want no pool", p.Name)
			case tc.want == "" && !strings.Contains(why, tc.why):
				t.Fatalf("reason %q, want it to contain %q", why, tc.why)
			case tc.want != "" && (p == nil || p.Name != tc.want):
				t.Fatalf("routed to %v (%s), want %s", p, why, tc.want)
			}
		})
	}
}
