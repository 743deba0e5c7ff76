package pool

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// A pool in container mode runs its jobs' containers as workflow pods that
// actions/runner-container-hooks create through the Kubernetes API, as the
// runner's service account: that account's Role holds the hooks' rights in the
// hook namespace (HookNamespace), so the pool must name it rather than run as the
// namespace's default account, which would lend those rights to every pod of the
// namespace. kubernetes-novolume pools put their workflow pods in a namespace of
// their own (JobsNamespace), so that those rights reach no runner pod and no
// runner Secret; kubernetes pools cannot (the hooks read the runner's pod and
// mount its claim, both in the runners' namespace). docs/design/container-mode.md.

// validateContainerMode checks the container mode fields together; each
// problem is an error of its own.
func (p *Pool) validateContainerMode() error {
	k := p.Kubernetes
	if k.ContainerMode != "" && !slices.Contains(ContainerModes, k.ContainerMode) {
		return fmt.Errorf("kubernetes.containerMode: %q must be one of %v, or left out (container jobs then need docker)", k.ContainerMode, ContainerModes)
	}
	if !k.InContainerMode() {
		return errors.Join(onlyInContainerMode(k)...)
	}
	var errs []error
	const why = "container mode exists to run container jobs without privileged docker: the hooks create the job's containers as pods"
	if k.DockerEnabled {
		errs = append(errs, fmt.Errorf("kubernetes.dockerEnabled: not with containerMode %s: %s; remove it (or containerMode, to run container jobs with docker)", k.ContainerMode, why))
	}
	if k.DockerdWithinRunnerContainer {
		errs = append(errs, fmt.Errorf("kubernetes.dockerdWithinRunnerContainer: not with containerMode %s: %s; remove it (or containerMode, to run container jobs with docker)", k.ContainerMode, why))
	}
	if k.ServiceAccountName == "" {
		errs = append(errs, fmt.Errorf("kubernetes.serviceAccountName: required with containerMode %s: the hooks create workflow pods as the runner's service account, "+
			"whose Role (runnerscaler hook-rbac) holds their rights in namespace %s; the namespace's default account would lend them to every pod there",
			k.ContainerMode, cmp.Or(k.HookNamespace(), "<jobsNamespace>")))
	}
	errs = append(errs, k.jobsNamespaceErrors()...)
	if k.ContainerMode == ContainerModeKubernetes && !k.JobContainerRequired() {
		errs = append(errs, errors.New("kubernetes.requireJobContainer: false is refused with containerMode kubernetes: a job without a container "+
			"runs its steps in the runner container, where the hooks' service account token is, and that token may exec into and delete "+
			"every pod of the runners' namespace, other runners' included; use kubernetes-novolume, whose token reaches only its jobs namespace"))
	}
	switch {
	case k.ContainerMode == ContainerModeKubernetes && k.WorkVolumeClaim.Kind == 0:
		errs = append(errs, errors.New("kubernetes.workVolumeClaim: required with containerMode kubernetes: the claim spec (storageClassName, accessModes, resources) "+
			"of the volume each runner shares with its workflow pod, as ARC's kubernetesModeWorkVolumeClaim"))
	case k.ContainerMode != ContainerModeKubernetes && k.WorkVolumeClaim.Kind != 0:
		errs = append(errs, fmt.Errorf("kubernetes.workVolumeClaim: only with containerMode kubernetes: in %s mode the hooks copy the workspace and share no volume", k.ContainerMode))
	}
	return errors.Join(errs...)
}

// jobsNamespaceErrors: kubernetes-novolume needs a jobs namespace apart from the
// runners'; kubernetes mode takes none (its workflow pods run beside the runner).
func (k Kubernetes) jobsNamespaceErrors() []error {
	ns := k.JobsNamespace
	switch {
	case k.ContainerMode == ContainerModeKubernetes && ns != "":
		return []error{errors.New("kubernetes.jobsNamespace: only with containerMode kubernetes-novolume: in kubernetes mode workflow pods run in the runners' namespace " +
			"(the hooks read the runner's pod and mount its work volume there); remove it")}
	case k.ContainerMode != ContainerModeNoVolume:
		return nil
	case ns == "":
		return []error{errors.New("kubernetes.jobsNamespace: required with containerMode kubernetes-novolume: the namespace of the pool's workflow pods, " +
			"where the runners' service account has the hooks' rights, apart from the runners' namespace")}
	case !dns1123Label.MatchString(ns) || len(ns) > 63:
		return []error{fmt.Errorf("kubernetes.jobsNamespace: %q must be a DNS-1123 label (lower-case letters, digits, '-') of at most 63 characters", ns)}
	case ns == k.Namespace:
		return []error{fmt.Errorf("kubernetes.jobsNamespace: %q is the runners' namespace: workflow pods need one of their own, so that the hooks' rights "+
			"(create, exec into and delete pods, read and delete Secrets) reach no runner pod and no runner credentials", ns)}
	}
	return nil
}

// onlyInContainerMode: the fields that mean something only in a container mode,
// set on a pool that has none.
func onlyInContainerMode(k Kubernetes) []error {
	var errs []error
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"jobsNamespace", k.JobsNamespace != ""},
		{"workVolumeClaim", k.WorkVolumeClaim.Kind != 0},
		{"requireJobContainer", k.RequireJobContainer != nil},
		{"hookTemplate", k.HookTemplate.Kind != 0},
	} {
		if f.set {
			errs = append(errs, fmt.Errorf("kubernetes.%s: only with a containerMode (%v); without one the runner runs container jobs with docker", f.name, ContainerModes))
		}
	}
	return errs
}
