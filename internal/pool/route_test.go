package pool_test

import (
	"slices"
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
			p, why := cfg.Route(tc.job, nil)
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

// TestRouteSkipsPoolsNotAdmitted: a pool admit refuses is skipped for the
// next matching one, with why in the reason; with none left the job is not
// routed and the reason is admit's; admit is asked only about pools whose
// scope and labels fit.
func TestRouteSkipsPoolsNotAdmitted(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(routing))
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	refuse := func(names ...string) pool.Admission {
		return func(p *pool.Pool, j pool.Job) (bool, string) {
			asked = append(asked, p.Name)
			for _, n := range names {
				if p.Name == n {
					return false, "group of pool " + p.Name + " does not admit repository " + j.Repository
				}
			}
			return true, ""
		}
	}
	job := pool.Job{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted", "gpu"}}

	p, why := cfg.Route(job, refuse("org-gpu"))
	if p != nil {
		t.Fatalf("routed to %s; want nothing (org-gpu is the only pool with gpu, and it refuses)", p.Name)
	}
	if why != "group of pool org-gpu does not admit repository acme/app" || !slices.Equal(asked, []string{"org-gpu"}) {
		t.Fatalf("reason %q, asked about %v; want the refusal's reason, asked about org-gpu only", why, asked)
	}

	asked = nil
	job.Labels = []string{"self-hosted"}
	p, why = cfg.Route(job, refuse("repo", "org-gpu"))
	if p == nil || p.Name != "org-any" {
		t.Fatalf("routed to %v (%s); want org-any, the next pool that fits", p, why)
	}
	if !strings.Contains(why, "pool repo does not admit") || !strings.Contains(why, "pool org-gpu does not admit") ||
		!slices.Equal(asked, []string{"repo", "org-gpu", "org-any"}) {
		t.Fatalf("reason %q, asked %v; want both skipped pools named, asked in routing order", why, asked)
	}

	asked = nil
	if p, why = cfg.Route(job, refuse()); p == nil || p.Name != "repo" || why != "" || len(asked) != 1 {
		t.Fatalf("everything admitted: %v %q, asked %v; want repo, no reason, one question", p, why, asked)
	}
}
