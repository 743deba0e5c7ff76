package runnerpod_test

import (
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// TestRemovedContainerModePoolKnowsItsHookNamespace: a container-mode pool
// removed from the pools file is drained in the form RemovedPool rebuilds from
// its runners' records (their StatefulSets' annotations, through package
// inventory). That form must still say where the runners' workflow pods are
// (Kubernetes.HookNamespace): the reconciler reads workflow pods, the
// workflow-pod busy signal and the leftover cleanup, only for a pool with a
// hook namespace. Without it, the drain of a removed pool stops a runner whose
// job runs in its workflow pod with that signal off, never deletes the
// workflow pod a killed runner left (`tail -f /dev/null` for ever, with its
// job's Secrets), and never drops the pool's workflow-pods budget.
//
// It fails today: the record has the scope and ephemeral only (record.go), and
// pool.Removed makes a pool without a container mode.
func TestRemovedContainerModePoolKnowsItsHookNamespace(t *testing.T) {
	t.Parallel()
	for mode, fields := range map[string]string{
		pool.ContainerModeNoVolume:   "      jobsNamespace: runner-jobs\n",
		pool.ContainerModeKubernetes: "      workVolumeClaim: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 5Gi}}}\n",
	} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cfg, err := pool.Parse([]byte(`
pools:
  - name: cm
    organization: acme
    maxReplicas: 1
    kubernetes:
      namespace: runners
      image: runner:1
      serviceAccountName: cm-hooks
      containerMode: ` + mode + "\n" + fields))
			if err != nil {
				t.Fatal(err)
			}
			p := &cfg.Pools[0]
			tmpl, err := runnerpod.Template(p)
			if err != nil {
				t.Fatal(err)
			}
			sts := runnerpod.StatefulSet(runnerpod.Spec{Pool: p, Template: tmpl, Hash: runnerpod.Hash(p, tmpl), Name: "cm-bcdfg",
				Deployment: "d", Now: time.Now(), Creds: runnerpod.Credentials{RunnerID: 7, JITConfig: "jit"}})
			removed, err := runnerpod.RemovedPool(p.Name, p.Kubernetes.Namespace, sts.Annotations)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := removed.Kubernetes.HookNamespace(), p.Kubernetes.HookNamespace(); got != want {
				t.Fatalf("removed pool %s drained with hook namespace %q (container mode %q), want %q: its workflow pods are not looked at",
					p.Name, got, removed.Kubernetes.ContainerMode, want)
			}
		})
	}
}
