package fakerunner

import "testing"

// How the runner takes a job, by its container hook and the job's container
// (actions/runner: ContainerHookManager, JobExtension.ValidateJobContainer).
func TestUsesHook(t *testing.T) {
	withContainer := job{Container: &jobContainer{Image: "busybox"}}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		j       job
		viaHook bool
		refused bool
	}{
		{"no hook, a container: on the runner (docker's, not simulated)", nil, withContainer, false, false},
		{"a hook and a container", map[string]string{"ACTIONS_RUNNER_CONTAINER_HOOKS": "/home/runner/k8s/index.js"}, withContainer, true, false},
		{"a hook, no container, not required", map[string]string{"ACTIONS_RUNNER_CONTAINER_HOOKS": "/home/runner/k8s/index.js"}, job{}, false, false},
		{"a hook, no container, required", map[string]string{"ACTIONS_RUNNER_CONTAINER_HOOKS": "/home/runner/k8s-novolume/index.js",
			"ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER": "true"}, job{}, false, true},
		{"a hook, no container, required only when exactly true", map[string]string{"ACTIONS_RUNNER_CONTAINER_HOOKS": "/home/runner/k8s/index.js",
			"ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER": "1"}, job{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := Env{Getenv: func(k string) string { return tc.env[k] }}
			viaHook, refusal := usesHook(env, tc.j)
			if viaHook != tc.viaHook || (refusal != "") != tc.refused {
				t.Errorf("usesHook = %v, %q; want %v, refused %v", viaHook, refusal, tc.viaHook, tc.refused)
			}
		})
	}
}

// TestPreparationFailed: a job whose prepare_job failed while it was being
// cancelled (its runner stopping) ends cancelled, as actions/runner ends a job
// cancelled in any step; otherwise it fails with the hook's exit code 1. (A
// stopped runner's container job reported as failed was taken, by the
// sweeper's re-run rule, for one that failed by itself.)
func TestPreparationFailed(t *testing.T) {
	if c, code, w := preparationFailed(true); c != "cancelled" || code != 0 || w != workerCancelled {
		t.Errorf("cancelled meanwhile: %s, exit %d, worker %d; want cancelled, 0, %d", c, code, w, workerCancelled)
	}
	if c, code, w := preparationFailed(false); c != "failure" || code != 1 || w != workerFailed {
		t.Errorf("not cancelled: %s, exit %d, worker %d; want failure, 1, %d", c, code, w, workerFailed)
	}
}
