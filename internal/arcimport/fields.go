package arcimport

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/suggest"
)

// The fields each ARC object may have (v0.22.3's CRDs, plus what v0.23–v0.27
// added: workflowJob, topologySpreadConstraints, containerMode,
// workVolumeClaimTemplate, githubAPICredentialsFrom). A field outside these is
// reported as unknown.
var (
	objectFields = []string{"apiVersion", "kind", "metadata", "spec", "status"}

	// runnerConfigFields are ARC's RunnerConfig: in a Runner's spec, a
	// RunnerDeployment's spec.template.spec and a RunnerSet's spec.
	runnerConfigFields = []string{"enterprise", "organization", "repository", "labels", "group", "ephemeral",
		"image", "workDir", "dockerdWithinRunnerContainer", "dockerEnabled", "dockerMTU", "dockerRegistryMirror",
		"volumeSizeLimit", "volumeStorageMedium", "containerMode", "githubAPICredentialsFrom"}

	// runnerPodFields are ARC's RunnerPodSpec: in a Runner's spec and a
	// RunnerDeployment's spec.template.spec.
	runnerPodFields = []string{"dockerdContainerResources", "dockerVolumeMounts", "dockerEnv", "containers", "env",
		"envFrom", "resources", "volumeMounts", "volumes", "enableServiceLinks", "initContainers", "nodeSelector",
		"serviceAccountName", "automountServiceAccountToken", "sidecarContainers", "securityContext",
		"imagePullPolicy", "imagePullSecrets", "affinity", "tolerations", "terminationGracePeriodSeconds",
		"ephemeralContainers", "hostAliases", "topologySpreadConstraint", "topologySpreadConstraints",
		"runtimeClassName", "dnsConfig", "workVolumeClaimTemplate"}

	runnerDeploymentFields = []string{"replicas", "selector", "template", "effectiveTime"}
	templateFields         = []string{"metadata", "spec"}

	// statefulSetFields are the StatefulSet fields of a RunnerSet's spec.
	statefulSetFields = []string{"replicas", "selector", "serviceName", "template", "volumeClaimTemplates",
		"effectiveTime", "minReadySeconds", "persistentVolumeClaimRetentionPolicy", "podManagementPolicy",
		"revisionHistoryLimit", "updateStrategy"}

	hraFields = []string{"scaleTargetRef", "minReplicas", "maxReplicas", "scaleDownDelaySecondsAfterScaleOut",
		"scaleUpTriggers", "scheduledOverrides", "metrics", "capacityReservations"}
	scaleTargetFields = []string{"kind", "name"}
	triggerFields     = []string{"githubEvent", "amount", "duration"}
	eventFields       = []string{"workflowJob", "checkRun", "pullRequest", "push"}
	overrideFields    = []string{"startTime", "endTime", "minReplicas", "recurrenceRule"}
	recurrenceFields  = []string{"frequency", "untilTime"}
	metadataFields    = []string{"labels", "annotations"}
)

// unknown reports each key of mapping n (at path) that is not in known, with
// the nearest known name when one is close (a typo).
func (c *converter) unknown(o *object, path string, n *yaml.Node, known ...[]string) {
	all := slices.Concat(known...)
	pairs(n, func(k string, _ *yaml.Node) {
		if slices.Contains(all, k) {
			return
		}
		instead := "remove it, or move it where ARC's schema has it"
		if moved := movedTo(path, k); moved != "" {
			instead = fmt.Sprintf("move it under %s, where ARC reads it", moved)
		} else if near := suggest.Closest(k, all); near != "" {
			instead = fmt.Sprintf("did you mean %q? ARC ignored the field as written", near)
		}
		c.drop(o, join(path, k), "unknown field: not in ARC's schema", instead)
	})
}

// movedTo is where a runner field written directly under a RunnerDeployment's
// spec belongs.
func movedTo(path, k string) string {
	if path == "spec" && (slices.Contains(runnerConfigFields, k) || slices.Contains(runnerPodFields, k)) {
		return "spec.template.spec"
	}
	return ""
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}
