// Package arcimport converts actions-runner-controller (ARC) manifests of the
// `actions.summerwind.dev/v1alpha1` API — RunnerDeployment, RunnerSet, Runner and
// HorizontalRunnerAutoscaler, in multi-document YAML or `kubectl get -o yaml`
// lists — into a pools file (package pool).
//
// Each RunnerDeployment or RunnerSet becomes one pool, with the
// HorizontalRunnerAutoscaler whose scaleTargetRef names it; one without an
// autoscaler keeps its fixed size (minReplicas = maxReplicas = replicas). What has
// no counterpart here is never dropped silently: every such field — a metrics-based
// autoscaler, an autoscaler whose target is not in the input, a lone Runner, an
// unknown field, ARC's runner image — is listed as a Dropped, naming the file,
// the document, the field's path and what to do instead.
//
// Fields that only ARC's controllers read or write (a StatefulSet's selector and
// serviceName, effectiveTime, capacityReservations, status, the objects' own
// labels and annotations, server-set metadata) mean nothing to a pool and are
// ignored.
//
// The conversion is pure: bytes in, a pools file and the list of what was not
// carried out. Output is deterministic: pools sorted by name, each preceded by a
// comment naming its sources.
package arcimport
