package tests

import (
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/local/fakehook"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestHookRBACPassesTheSimulatedHooksGate: the objects hookrbac makes for a
// pool in each container mode let the simulated hook (local/fakehook, written
// from the hooks' source) past its permission gate, as the pool's runners'
// service account, in the hook namespace; and the gate of the other release
// is no yardstick for it: kubernetes-novolume's Role fails v0.7.0's gate
// (batch/jobs), which shows the check can fail.
func TestHookRBACPassesTheSimulatedHooksGate(t *testing.T) {
	for _, tc := range []struct {
		mode       string
		hook       fakehook.Mode
		otherGate  fakehook.Mode
		otherFails bool
	}{
		{pool.ContainerModeKubernetes, fakehook.Kubernetes, fakehook.NoVolume, false},
		{pool.ContainerModeNoVolume, fakehook.NoVolume, fakehook.Kubernetes, true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			cs, runners := testenv.Namespace(t)
			_, jobs := testenv.Namespace(t)
			p := &pool.Pool{Name: "cm", Kubernetes: pool.Kubernetes{Namespace: runners, ServiceAccountName: "cm-runner",
				ContainerMode: tc.mode, JobsNamespace: jobs}}
			applyHookRBAC(t, cs, p)
			ns := p.Kubernetes.HookNamespace()
			check := func(m fakehook.Mode) error {
				h, err := fakehook.New(fakehook.Config{Mode: m, RunnerPod: "runner-1", Namespace: ns, ClaimName: "runner-1-work",
					WorkDir: t.TempDir(), PrepareTimeout: 1}, testenv.ServiceAccountRESTConfig(t, runners, "cm-runner"), nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				return h.CheckPermissions(t.Context())
			}
			if err := check(tc.hook); err != nil {
				t.Errorf("the %s hook's gate refuses the pool's service account in %s: %v", tc.hook, ns, err)
			}
			if err := check(tc.otherGate); (err != nil) != tc.otherFails {
				t.Errorf("the %s hook's gate: %v, want refused %v", tc.otherGate, err, tc.otherFails)
			}
		})
	}
}
