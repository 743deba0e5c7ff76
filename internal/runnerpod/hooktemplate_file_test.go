package runnerpod_test

import (
	"encoding/json"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// TestHookTemplateFileHasNoNullSpecField: the hook template file of a pool
// whose hookTemplate sets no containers (or that has none) carries no spec key
// with a null value. The hooks merge every key of the file's spec into the
// workflow pod's (k8s/utils.ts mergePodSpecWithOptions, v0.7.0 and v0.8.1),
// and `from.containers.filter(…)` throws on containers: null — every
// container job failed in prepare_job so (local/fakehook plays it:
// TestContainerJobsRunInWorkflowPods).
func TestHookTemplateFileHasNoNullSpecField(t *testing.T) {
	t.Parallel()
	for name, hookTemplate := range map[string]string{
		"labels only":   "      hookTemplate: {metadata: {labels: {team: a}}}\n",
		"node selector": "      hookTemplate: {spec: {nodeSelector: {pool: jobs}}}\n",
		"none":          "",
	} {
		t.Run(name, func(t *testing.T) {
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
      containerMode: kubernetes-novolume
      jobsNamespace: runner-jobs
` + hookTemplate))
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := runnerpod.Template(&cfg.Pools[0])
			if err != nil {
				t.Fatal(err)
			}
			var file struct {
				Spec map[string]json.RawMessage `json:"spec"`
			}
			if err := json.Unmarshal([]byte(tmpl.Annotations[runnerpod.AnnotationHookTemplate]), &file); err != nil {
				t.Fatalf("hook template annotation: %v", err)
			}
			for k, v := range file.Spec {
				if string(v) == "null" {
					t.Errorf("hook template file's spec.%s is null: the hooks' merge throws on it (file %s)", k, tmpl.Annotations[runnerpod.AnnotationHookTemplate])
				}
			}
			if string(file.Spec["automountServiceAccountToken"]) != "false" {
				t.Errorf("spec %v: want automountServiceAccountToken false kept", file.Spec)
			}
		})
	}
}
