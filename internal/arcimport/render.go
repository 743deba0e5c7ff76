package arcimport

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

const header = `Pools converted from ARC manifests by runnerscaler import-arc.
Review it before deploying: what could not be carried was listed by the import.`

// render writes the pools file.
func render(drafts []*draft) ([]byte, error) {
	list := seq()
	for _, dr := range drafts {
		n := dr.node()
		n.HeadComment = strings.Join(dr.comments, "\n")
		list.Content = append(list.Content, n)
	}
	root := &omap{}
	root.set("pools", list)
	doc := root.node()
	doc.HeadComment = header
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("writing pools: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("writing pools: %w", err)
	}
	return b.Bytes(), nil
}

// node is the pool as the pools file has it.
func (dr *draft) node() *yaml.Node {
	p := &omap{}
	p.set("name", str(dr.name))
	for _, f := range []struct{ key, v string }{{"enterprise", dr.enterprise}, {"organization", dr.organization},
		{"repository", dr.repository}, {"group", dr.group}} {
		if f.v != "" {
			p.set(f.key, str(f.v))
		}
	}
	if len(dr.labels) > 0 {
		labels := seq()
		labels.Style = yaml.FlowStyle
		for _, l := range dr.labels {
			labels.Content = append(labels.Content, str(l))
		}
		p.set("labels", labels)
	}
	if dr.arch != "x64" {
		p.set("arch", str(dr.arch))
	}
	if dr.ephemeral != nil {
		p.set("ephemeral", boolean(*dr.ephemeral))
	}
	if dr.tokenReadable {
		p.set("allowJobsToReadRegistrationToken", boolean(true))
	}
	p.set("minReplicas", num(dr.min))
	p.set("maxReplicas", num(*dr.max))
	if dr.trigger != nil && !dr.trigger.empty() {
		p.set("scaleUpTriggers", seq(dr.trigger.node()))
	}
	if dr.delay != nil {
		p.set("scaleDownDelaySecondsAfterScaleOut", num(*dr.delay))
	}
	if len(dr.overrides) > 0 {
		p.set("scheduledOverrides", seq(dr.overrides...))
	}
	p.set("kubernetes", dr.kubernetes())
	return p.node()
}

// docker reports whether the pool has ARC's docker sidecar, or dockerd in the
// runner container.
func (dr *draft) docker() (sidecar, dind bool) {
	dind = dr.dind != nil && *dr.dind
	return !dind && (dr.dockerEnabled == nil || *dr.dockerEnabled), dind
}

func (dr *draft) kubernetes() *yaml.Node {
	k := &omap{}
	sidecar, dind := dr.docker()
	k.set("namespace", str(dr.namespace))
	if dr.serviceAccount != "" {
		k.set("serviceAccountName", str(dr.serviceAccount))
	}
	if sidecar {
		k.set("dockerEnabled", boolean(true))
	}
	if dind {
		k.set("dockerdWithinRunnerContainer", boolean(true))
	}
	k.set("template", dr.template())
	if len(dr.claims) > 0 {
		k.set("volumeClaimTemplates", seq(dr.claims...))
	}
	if dr.containerMode != "" {
		k.set("containerMode", str(dr.containerMode))
		if dr.jobsNamespace != "" {
			k.set("jobsNamespace", str(dr.jobsNamespace))
		}
		if dr.workClaim != nil {
			k.set("workVolumeClaim", dr.workClaim)
		}
		if dr.requireJobContainer != nil {
			k.set("requireJobContainer", boolean(*dr.requireJobContainer))
		}
		if dr.hookTemplate != nil {
			k.set("hookTemplate", dr.hookTemplate)
		}
	}
	return k.node()
}

func (dr *draft) template() *yaml.Node {
	runner := &omap{}
	runner.set("name", str("runner"))
	runner.set("image", str(dr.image))
	for _, key := range dr.runner.keys {
		runner.set(key, dr.runner.get(key))
	}
	containers := seq(runner.node())
	containers.Content = append(containers.Content, dr.extra...)
	spec := &omap{}
	spec.set("containers", containers)
	for _, key := range dr.pod.keys {
		spec.set(key, dr.pod.get(key))
	}
	if sidecar, _ := dr.docker(); sidecar && dr.sidecar.get("image") != nil {
		// A native sidecar, after the pool's own init containers, as runnerpod
		// puts its own (see fullSidecar).
		inits := seq()
		if own := spec.get("initContainers"); own != nil {
			inits.Content = append(inits.Content, own.Content...)
		}
		inits.Content = append(inits.Content, dr.sidecar.node())
		spec.set("initContainers", inits)
	}
	t := &omap{}
	if !dr.meta.empty() {
		t.set("metadata", dr.meta.node())
	}
	t.set("spec", spec.node())
	return t.node()
}
