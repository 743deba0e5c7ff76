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
