package runnerpod_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// TestShippedPoolsAreAdmissible: the pools files we ship pass the checks.
func TestShippedPoolsAreAdmissible(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"../../infra/pools.example.yaml", "../../infra/pools.yaml", "../../local/pools.yaml"} {
		cfg, err := pool.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := runnerpod.Validate(cfg); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

// TestValidateNamesPoolAndField: a template the API server would refuse in a
// StatefulSet fails Validate with the pool and the field's path. (That the server
// refuses each one is checked against a real API server in package reconcile.)
func TestValidateNamesPoolAndField(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ spec, want string }{
		"restart policy":    {`{restartPolicy: OnFailure, containers: [{name: runner, image: r}]}`, `kubernetes.template: spec.restartPolicy: "OnFailure"`},
		"no image":          {`{containers: [{name: runner, image: r}, {name: side}]}`, "spec.containers[1].image: required"},
		"claim is a volume": {`{containers: [{name: runner, image: r, volumeMounts: [{name: work, mountPath: /w}]}]}`, ""},
		"docker sidecar":    {`{containers: [{name: runner, image: r}]}`, ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw := fmt.Sprintf(`
pools:
  - name: p
    organization: acme
    maxReplicas: 1
    kubernetes:
      namespace: ns
      dockerEnabled: true
      template: {spec: %s}
      volumeClaimTemplates: [{metadata: {name: work}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}]
`, c.spec)
			cfg, err := pool.Parse([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			err = runnerpod.Validate(cfg)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), "pool p: ") || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Validate: %v, want pool p and %q", err, c.want)
			}
		})
	}
}
