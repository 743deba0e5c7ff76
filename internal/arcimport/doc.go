// Package arcimport converts actions-runner-controller (ARC) configurations
// into a pools file (package pool): runner scale sets (`actions.github.com/v1alpha1`
// AutoscalingRunnerSet objects, and the gha-runner-scale-set Helm chart's
// values files that render them), and legacy ARC's `actions.summerwind.dev/v1alpha1`
// RunnerDeployment, RunnerSet, Runner and HorizontalRunnerAutoscaler — in
// multi-document YAML or `kubectl get -o yaml` lists.
//
// Each scale set becomes one pool named after it, labelled with its name (the
// label its jobs' runs-on names). Each RunnerDeployment or RunnerSet becomes one
// pool, with the HorizontalRunnerAutoscaler whose scaleTargetRef names it; one
// without an autoscaler keeps its fixed size (minReplicas = maxReplicas =
// replicas). What has no counterpart here is never dropped silently: every such
// field — a metrics-based autoscaler, an autoscaler whose target is not in the
// input, a lone Runner, a scale set's credentials or listener, an unknown field,
// ARC's runner image, what the sweeper reserves — is listed as a Dropped, naming
// the file, the document, the field's path and what to do instead. A key
// written twice in one mapping is refused (ErrInput), naming both lines.
//
// ARC's container modes become a pool's (containermode.go): the mode, the work
// volume's claim, the hook template when the input holds it, and the hooks'
// settings; what runnerscaler renders itself (the hooks' variables, the work
// volume) is left out of the template with a note, and the pool names its
// hooks' service account and, in kubernetes-novolume, its jobs namespace.
//
// Every pool written passes the sweeper's own checks (Check): a pool that would
// not is left out and listed, so that the file never stops the other pools.
// Merge adds converted pools to an existing pools file, keeping its bytes.
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
