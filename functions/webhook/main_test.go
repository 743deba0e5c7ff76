package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDoesNotLinkKubernetes keeps the webhook binary small and quick to start: it
// must not link client-go, the Kubernetes API types or the EKS authenticator.
func TestDoesNotLinkKubernetes(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc", ".")
	cmd.Env = append(cmd.Environ(), "GOOS=linux")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list returned %d packages; the check would prove nothing", len(deps))
	}
	for _, d := range deps {
		for _, banned := range []string{"k8s.io/client-go", "k8s.io/api/", "k8s.io/apimachinery", "sigs.k8s.io/aws-iam-authenticator"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("functions/webhook links %s", d)
			}
		}
	}
}
