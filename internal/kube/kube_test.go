package kube_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/kube"
)

// TestFromOperatorKubeconfig: the current context by default, the named one
// when given; a context the file lacks is an error naming it.
func TestFromOperatorKubeconfig(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters:
  - {name: a, cluster: {server: "https://a.example:6443"}}
  - {name: b, cluster: {server: "https://b.example:6443"}}
users: [{name: u, user: {token: t}}]
contexts:
  - {name: a, context: {cluster: a, user: u}}
  - {name: b, context: {cluster: b, user: u}}
current-context: a
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for context, host := range map[string]string{"": "https://a.example:6443", "b": "https://b.example:6443"} {
		cfg, err := kube.FromOperatorKubeconfig(path, context)
		if err != nil || cfg.Host != host {
			t.Fatalf("context %q: %v, %v; want host %s", context, cfg, err, host)
		}
	}
	if _, err := kube.FromOperatorKubeconfig(path, "c"); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Fatalf("context c: %v; want an error naming it", err)
	}
}
