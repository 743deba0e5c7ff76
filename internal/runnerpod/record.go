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
//
// A container-mode pool's runners also record the mode and the hook namespace
// (AnnotationContainerMode, AnnotationHookNamespace): the drain of a removed
// pool still watches, and cleans up, their workflow pods.
const (
	AnnotationScope         = "runnerscaler.dev/scope"
	AnnotationEphemeral     = "runnerscaler.dev/ephemeral"
	AnnotationDeployment    = "runnerscaler.dev/deployment"
	AnnotationContainerMode = "runnerscaler.dev/container-mode"
	AnnotationHookNamespace = "runnerscaler.dev/hook-namespace"
)

// record returns the annotations that record p and the deployment on its runners.
func record(p *pool.Pool, deployment string) map[string]string {
	a := map[string]string{AnnotationScope: p.Scope().String(), AnnotationEphemeral: strconv.FormatBool(p.IsEphemeral())}
	if deployment != "" {
		a[AnnotationDeployment] = deployment
	}
	if k := p.Kubernetes; k.InContainerMode() {
		a[AnnotationContainerMode] = k.ContainerMode
		a[AnnotationHookNamespace] = k.HookNamespace()
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
	p := pool.Removed(name, namespace, s, ephemeral)
	if mode := annotations[AnnotationContainerMode]; mode == pool.ContainerModeKubernetes || mode == pool.ContainerModeNoVolume {
		p.Kubernetes.ContainerMode = mode
		if mode == pool.ContainerModeNoVolume {
			p.Kubernetes.JobsNamespace = annotations[AnnotationHookNamespace]
		}
	}
	return p, nil
}
