// Package pool loads and validates the runner pool configuration (ARC's RunnerSet
// and HorizontalRunnerAutoscaler in one declaration) and routes workflow jobs to
// pools by scope and labels.
//
// The file is YAML; every field is checked at load and an error names the pool
// and the field's path, e.g. `pools[1] (linux-arm): maxReplicas: must be >= minReplicas (2)`.
// The pod template is kept as raw YAML here, so that this package (and the webhook
// binary that uses it) does not link the Kubernetes API types; the sweeper decodes
// and validates it strictly (package runnerpod).
package pool
