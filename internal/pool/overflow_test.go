package pool_test

import (
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// overflowPools is a, b, c (organization org) and r (repository org/app),
// with a's, b's and c's overflowTo set to %s, %s and %s.
func overflowPools(a, b, c string) string {
	field := func(to string) string {
		if to == "" {
			return ""
		}
		return "\n    overflowTo: " + to
	}
	pool := func(name, scope, labels, to string) string {
		return "\n  - name: " + name + "\n    " + scope + "\n    labels: " + labels + "\n    maxReplicas: 1" + field(to) +
			"\n    kubernetes: {namespace: ns, image: runner:1}"
	}
	return "pools:" + pool("a", "organization: org", "[x]", a) + pool("b", "organization: org", "[x, y]", b) +
		pool("c", "organization: org", "[x, y]", c) + pool("r", "repository: org/app", "[x]", "")
}

// TestOverflowToIsValidated: overflowTo names another pool of the file, and no
// chain of them comes back; each error names the field and the pool.
func TestOverflowToIsValidated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, a, b, c, want string
	}{
		{"chain", "b", "c", "", ""},
		{"two into one", "c", "c", "", ""},
		{"itself", "a", "", "", `pools[0] (a): overflowTo: "a" is the pool itself`},
		{"unknown", "nope", "", "", `pools[0] (a): overflowTo: no pool is named "nope"`},
		{"cycle of two", "b", "a", "", "pools[0] (a): overflowTo: the overflow chain a -> b -> a comes back to a"},
		{"cycle of three", "b", "c", "a", "pools[0] (a): overflowTo: the overflow chain a -> b -> c -> a comes back to a"},
		{"into a cycle", "b", "c", "b", "pools[1] (b): overflowTo: the overflow chain b -> c -> b comes back to b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := pool.Parse([]byte(overflowPools(tc.a, tc.b, tc.c)))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid chain refused: %v", err)
			case tc.want == "":
				if got := cfg.Overflow(cfg.Pool("a")); got == nil || got.Name != tc.a {
					t.Fatalf("Overflow(a) = %v, want %s", got, tc.a)
				}
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestTakes: a pool takes a job its scope covers and whose every label it
// has; a job without labels it never takes.
func TestTakes(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(overflowPools("", "", "")))
	if err != nil {
		t.Fatal(err)
	}
	b, r := cfg.Pool("b"), cfg.Pool("r")
	for _, tc := range []struct {
		name string
		p    *pool.Pool
		job  pool.Job
		want bool
	}{
		{"labels and organization", b, pool.Job{Repository: "org/app", Organization: "ORG", Labels: []string{"self-hosted", "Y"}}, true},
		{"a label it lacks", b, pool.Job{Repository: "org/app", Organization: "org", Labels: []string{"z"}}, false},
		{"another organization", b, pool.Job{Repository: "other/app", Organization: "other", Labels: []string{"x"}}, false},
		{"no labels", b, pool.Job{Repository: "org/app", Organization: "org"}, false},
		{"its repository", r, pool.Job{Repository: "Org/App", Organization: "org", Labels: []string{"x"}}, true},
		{"another repository", r, pool.Job{Repository: "org/web", Organization: "org", Labels: []string{"x"}}, false},
	} {
		if got := tc.p.Takes(tc.job); got != tc.want {
			t.Errorf("%s: %s.Takes(%+v) = %v, want %v", tc.name, tc.p.Name, tc.job, got, tc.want)
		}
	}
}
