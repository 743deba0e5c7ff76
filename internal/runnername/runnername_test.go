package runnername_test

import (
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/runnername"
)

// TestNewNamesAreFreshAndOfThePool: names are `<pool>-` and five characters of
// the generateName alphabet, differ from call to call, and their pods are
// recognised as the pool's runners (and not another pool's).
func TestNewNamesAreFreshAndOfThePool(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		name := runnername.New("octo")
		random, ok := strings.CutPrefix(name, "octo-")
		if !ok || len(random) != 5 || strings.Trim(random, "bcdfghjklmnpqrstvwxz2456789") != "" {
			t.Fatalf("name %q, want octo- and five characters of the generateName alphabet", name)
		}
		seen[name] = true
		pod := runnername.Pod(name)
		if !runnername.IsPodOf("octo", pod) {
			t.Fatalf("pod %q is not recognised as pool octo's", pod)
		}
		if runnername.IsPodOf("oct", pod) || runnername.IsPodOf("octo-x", pod) {
			t.Fatalf("pod %q is recognised as another pool's", pod)
		}
		if got := runnername.FromPod(pod); got != name {
			t.Fatalf("FromPod(%q) = %q, want %q", pod, got, name)
		}
	}
	if len(seen) < 95 {
		t.Fatalf("%d distinct names in 100", len(seen))
	}
}

// TestIsPodOfRejectsOtherShapes: a runner's own name (its StatefulSet's), a
// random part of another length, another pod index and a hosted runner's name
// are not a pool's runner pods.
func TestIsPodOfRejectsOtherShapes(t *testing.T) {
	t.Parallel()
	name := runnername.New("octo")
	for _, pod := range []string{
		name,
		runnername.Pod(name + "b"),
		runnername.Pod(strings.TrimSuffix(name, name[len(name)-1:])),
		name + "-1",
		"GitHub Actions 5",
	} {
		if runnername.IsPodOf("octo", pod) {
			t.Errorf("%q is taken for a runner pod of pool octo", pod)
		}
	}
}
