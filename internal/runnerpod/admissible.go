package runnerpod

import (
	"errors"
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// admissible finds, in the pod template and volume claim templates of a
// runner's StatefulSet (finalPod), what the API server refuses, so that the
// sweeper fails at start naming the field rather than at every creation, and
// `runnerscaler validate` reports it. It returns every refusal, not the first.
// These are the refusals that are cheap to see without a server; the
// reconciler also asks the server itself (a dry run) before the first creation
// of each template. Errors name the field by its path in the template: what the
// runnerscaler adds comes after what the template has, so a template's element
// keeps its index.
func admissible(tmpl corev1.PodTemplateSpec, claims []corev1.PersistentVolumeClaim) []error {
	spec := tmpl.Spec
	var errs []error
	if spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, fmt.Errorf("spec.restartPolicy: %q: a StatefulSet's pods must restart Always", spec.RestartPolicy))
	}
	if spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, errors.New("spec.activeDeadlineSeconds: not supported in a StatefulSet"))
	}
	volumes := map[string]bool{}
	for i, v := range spec.Volumes {
		switch msgs := validation.IsDNS1123Label(v.Name); {
		case len(msgs) > 0:
			errs = append(errs, fmt.Errorf("spec.volumes[%d].name: %q: %s", i, v.Name, msgs[0]))
		case volumes[v.Name]:
			errs = append(errs, fmt.Errorf("spec.volumes[%d].name: %q: duplicate volume name", i, v.Name))
		}
		volumes[v.Name] = true
	}
	for _, c := range claims {
		volumes[c.Name] = true
	}
	names := map[string]bool{}
	for _, list := range []struct {
		field      string
		containers []corev1.Container
	}{{"spec.containers", spec.Containers}, {"spec.initContainers", spec.InitContainers}} { // the server's order
		for i, c := range list.containers {
			for _, err := range admissibleContainer(c, names, volumes) {
				errs = append(errs, fmt.Errorf("%s[%d].%w", list.field, i, err))
			}
		}
	}
	return errs
}

func admissibleContainer(c corev1.Container, names, volumes map[string]bool) []error {
	var errs []error
	switch msgs := validation.IsDNS1123Label(c.Name); {
	case len(msgs) > 0:
		errs = append(errs, fmt.Errorf("name: %q: %s", c.Name, msgs[0]))
	case names[c.Name]:
		errs = append(errs, fmt.Errorf("name: %q: duplicate container name", c.Name))
	}
	names[c.Name] = true
	if c.Image == "" {
		errs = append(errs, errors.New("image: required"))
	}
	paths := map[string]bool{}
	for j, m := range c.VolumeMounts {
		if !volumes[m.Name] {
			errs = append(errs, fmt.Errorf("volumeMounts[%d].name: %q: no such volume or volume claim template", j, m.Name))
		}
		if p := path.Clean(m.MountPath); paths[p] {
			errs = append(errs, fmt.Errorf("volumeMounts[%d].mountPath: %q: another volume is mounted there", j, m.MountPath))
		} else {
			paths[p] = true
		}
	}
	for name, req := range c.Resources.Requests {
		if limit, ok := c.Resources.Limits[name]; ok && req.Cmp(limit) > 0 {
			errs = append(errs, fmt.Errorf("resources.requests: %s %s is over its limit %s", name, req.String(), limit.String()))
		}
	}
	return errs
}
