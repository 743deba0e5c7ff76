package runnerpod

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// admissible finds, in a pool's pod template, what the API server refuses in a
// StatefulSet, so that the sweeper fails at start naming the field rather than at
// every creation. These are the refusals that are cheap to see without a server;
// the reconciler also asks the server itself (a dry run) before the first creation
// of each template. Errors name the field by its path in the template.
func admissible(tmpl corev1.PodTemplateSpec, claims []corev1.PersistentVolumeClaim) error {
	spec := tmpl.Spec
	if spec.RestartPolicy != corev1.RestartPolicyAlways {
		return fmt.Errorf("spec.restartPolicy: %q: a StatefulSet's pods must restart Always", spec.RestartPolicy)
	}
	if spec.ActiveDeadlineSeconds != nil {
		return errors.New("spec.activeDeadlineSeconds: not supported in a StatefulSet")
	}
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
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
			if err := admissibleContainer(c, names, volumes); err != nil {
				return fmt.Errorf("%s[%d].%w", list.field, i, err)
			}
		}
	}
	return nil
}

func admissibleContainer(c corev1.Container, names, volumes map[string]bool) error {
	if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
		return fmt.Errorf("name: %q: %s", c.Name, msgs[0])
	}
	if names[c.Name] {
		return fmt.Errorf("name: %q: duplicate container name", c.Name)
	}
	names[c.Name] = true
	if c.Image == "" {
		return errors.New("image: required")
	}
	for j, m := range c.VolumeMounts {
		if !volumes[m.Name] {
			return fmt.Errorf("volumeMounts[%d].name: %q: no such volume or volume claim template", j, m.Name)
		}
	}
	for name, req := range c.Resources.Requests {
		if limit, ok := c.Resources.Limits[name]; ok && req.Cmp(limit) > 0 {
			return fmt.Errorf("resources.requests: %s %s is over its limit %s", name, req.String(), limit.String())
		}
	}
	return nil
}
