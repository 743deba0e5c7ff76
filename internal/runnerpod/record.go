package runnerpod

import (
	"fmt"
	"strconv"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// A runner's StatefulSet, pod and Secret record its pool's scope, whether it is
// ephemeral, and the deployment that made it, so that a sweeper can still
// unregister and delete it after its pool was removed from the pools file
// (pool.Removed) — and only if it is its own.
const (
	AnnotationScope      = "runnerscaler.dev/scope"
	AnnotationEphemeral  = "runnerscaler.dev/ephemeral"
	AnnotationDeployment = "runnerscaler.dev/deployment"
)

// record returns the annotations that record p and the deployment on its runners.
func record(p *pool.Pool, deployment string) map[string]string {
	a := map[string]string{AnnotationScope: p.Scope().String(), AnnotationEphemeral: strconv.FormatBool(p.IsEphemeral())}
	if deployment != "" {
		a[AnnotationDeployment] = deployment
	}
	return a
}

// RemovedPool rebuilds, from a runner object's annotations, the pool it belonged
// to, in its draining form. Objects written before these annotations existed
// cannot be placed: the error says so.
func RemovedPool(name, namespace string, annotations map[string]string) (*pool.Pool, error) {
	raw, ok := annotations[AnnotationScope]
	if !ok {
		return nil, fmt.Errorf("pool %s: its runners do not record their scope (created by an older sweeper): "+
			"once they are idle, remove their runners on GitHub and delete them by hand", name)
	}
	s, err := scope.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", name, err)
	}
	ephemeral, err := strconv.ParseBool(annotations[AnnotationEphemeral])
	if err != nil {
		ephemeral = true // the default, and the safe side: a finished ephemeral runner is only released by GitHub's answer
	}
	return pool.Removed(name, namespace, s, ephemeral), nil
}
