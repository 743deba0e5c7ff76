package suggest_test

import (
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/suggest"
)

func TestClosest(t *testing.T) {
	t.Parallel()
	fields := []string{"name", "maxReplicas", "minReplicas", "resources", "nodeSelector", "tolerations"}
	for _, c := range []struct{ name, want string }{
		{"maxReplica", "maxReplicas"},
		{"MaxReplicas", "maxReplicas"},
		{"resource", "resources"},
		{"nodeselector", "nodeSelector"},
		{"toleration", "tolerations"},
		{"nmae", "name"},
		{"image", ""},
		{"x", ""},
	} {
		if got := suggest.Closest(c.name, fields); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}
