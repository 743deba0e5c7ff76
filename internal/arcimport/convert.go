package arcimport

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// ARC's API group and kinds.
const (
	apiVersion      = "actions.summerwind.dev/v1alpha1"
	kindDeployment  = "RunnerDeployment"
	kindRunnerSet   = "RunnerSet"
	kindRunner      = "Runner"
	kindAutoscaler  = "HorizontalRunnerAutoscaler"
	defaultARCImage = "summerwind/actions-runner:latest"
	defaultARCDind  = "summerwind/actions-runner-dind:latest"
	arcDefaultMin   = 1 // ARC's HRA minReplicas when unset
)

// converter collects what is dropped while objects are converted.
type converter struct {
	opts    Options
	dropped []Dropped
	notes   []string
	// hookEnv holds the container hooks' variables of the object being read
	// (containermode.go).
	hookEnv []hookEnvVar
	// configMaps are the input's ConfigMaps by name, a hook template's source;
	// used, those that were.
	configMaps map[string]*object
	used       map[*object]bool
}

// drop records that the field at path of o (the whole object when path is "")
// is not carried.
func (c *converter) drop(o *object, path, reason, instead string) {
	p := o.path(path)
	if path == "" {
		p = strings.TrimSuffix(o.at, ".")
	}
	c.dropped = append(c.dropped, Dropped{File: o.file, Document: o.doc, Path: p, Reason: reason, Instead: instead})
}

// note records something carried in another form.
func (c *converter) note(o *object, format string, args ...any) {
	c.notes = append(c.notes, fmt.Sprintf("%s: document %d: %s: ", o.file, o.doc, o.ref())+fmt.Sprintf(format, args...))
}

func isARC(o *object) bool {
	if o.apiVersion != "" && o.apiVersion != apiVersion {
		return false
	}
	switch o.kind {
	case kindDeployment, kindRunnerSet, kindRunner, kindAutoscaler:
		return true
	}
	return false
}

// convert pairs autoscalers with their targets and converts each
// RunnerDeployment and RunnerSet into a draft pool.
func (c *converter) convert(objs []*object) []*draft {
	var deployments, autoscalers, scaleSets, configMaps []*object
	c.configMaps, c.used = map[string]*object{}, map[*object]bool{}
	for _, o := range objs {
		if o.kind == "ConfigMap" && o.apiVersion == "v1" {
			configMaps = append(configMaps, o)
			c.configMaps[o.name] = o
		}
	}
	for _, o := range objs {
		switch {
		case o.kind == "ConfigMap" && o.apiVersion == "v1": // after the pools: a hook template's source is used
		case isValues(o):
			o.kind = kindValues
			scaleSets = append(scaleSets, o)
		case o.apiVersion == scaleSetAPIVersion && o.kind == kindScaleSet:
			scaleSets = append(scaleSets, o)
		case o.apiVersion == scaleSetAPIVersion:
			c.drop(o, "", fmt.Sprintf("%s is made by ARC's controller from an AutoscalingRunnerSet", o.ref()),
				"import the AutoscalingRunnerSet (kubectl get autoscalingrunnersets -A -o yaml) or its release's values (helm get values RELEASE -n NAMESPACE -o yaml)")
		case !isARC(o):
			c.drop(o, "", fmt.Sprintf("%s (apiVersion %q) is not an ARC runner resource (%s or %s), nor a gha-runner-scale-set values file", o.ref(), o.apiVersion, apiVersion, scaleSetAPIVersion),
				"apply it with kubectl if your runners need it: runnerscaler does not create it")
		case o.kind == kindRunner:
			c.drop(o, "", fmt.Sprintf("%s is a single runner with no deployment or autoscaler", o.ref()),
				"put its spec under a RunnerDeployment's spec.template.spec and import that, or write a pool with minReplicas = maxReplicas = 1")
		case o.kind == kindAutoscaler:
			autoscalers = append(autoscalers, o)
		default:
			deployments = append(deployments, o)
		}
	}
	paired := c.pair(autoscalers, deployments)
	var drafts []*draft
	for _, d := range deployments {
		if dr := c.deployment(d, paired[d]); dr != nil {
			drafts = append(drafts, dr)
		}
	}
	for _, o := range scaleSets {
		if dr := c.scaleSet(o); dr != nil {
			drafts = append(drafts, dr)
		}
	}
	for _, o := range configMaps {
		if !c.used[o] {
			c.drop(o, "", fmt.Sprintf("%s (apiVersion %q) is not an ARC runner resource (%s or %s), nor a gha-runner-scale-set values file, nor a hook template of one", o.ref(), o.apiVersion, apiVersion, scaleSetAPIVersion),
				"apply it with kubectl if your runners need it: runnerscaler does not create it")
		}
	}
	return drafts
}

// pair finds each autoscaler's target: the deployment its scaleTargetRef names
// (kind RunnerDeployment by default; the same namespace when both name one)
// that no other autoscaler took, in the autoscaler's own file first.
func (c *converter) pair(autoscalers, deployments []*object) map[*object]*object {
	paired := map[*object]*object{}
	taken := map[*object]bool{}
	wants := map[*object]string{}
	for _, h := range autoscalers {
		ref := get(get(h.node, "spec"), "scaleTargetRef")
		c.unknown(h, "spec.scaleTargetRef", ref, scaleTargetFields)
		kind := scalar(get(ref, "kind"))
		if kind == "" {
			kind = kindDeployment
		}
		wants[h] = kind + "/" + scalar(get(ref, "name"))
	}
	matches := func(h, d *object) bool {
		return !taken[d] && d.kind+"/"+d.name == wants[h] && (h.namespace == "" || d.namespace == "" || h.namespace == d.namespace)
	}
	for _, sameFile := range []bool{true, false} {
		for _, h := range autoscalers {
			if _, done := paired[h]; done {
				continue
			}
			for _, d := range deployments {
				if (d.file == h.file) == sameFile && matches(h, d) {
					paired[h], taken[d] = d, true
					break
				}
			}
		}
	}
	byTarget := map[*object]*object{}
	for _, h := range autoscalers {
		d, ok := paired[h]
		if ok {
			byTarget[d] = h
			continue
		}
		c.drop(h, "", fmt.Sprintf("%s: its target %s (spec.scaleTargetRef) is not in the input, or another autoscaler took it", h.ref(), wants[h]),
			"import the autoscaler together with its RunnerDeployment or RunnerSet (on the same command line), one autoscaler per target")
	}
	return byTarget
}

// draft is a pool being built from an ARC deployment and its autoscaler.
type draft struct {
	src, hra *object
	name     string
	comments []string

	enterprise, organization, repository, group string
	labels                                      []string
	arch                                        string
	ephemeral                                   *bool
	tokenReadable                               bool // allowJobsToReadRegistrationToken (token.go)
	min                                         int
	max                                         *int
	trigger                                     *omap
	delay                                       *int
	overrides                                   []*yaml.Node
	overrideMins                                []int
	overridePaths                               []string

	serviceAccount, namespace  string
	dockerEnabled, dind        *bool
	dockerMTU, dockerMirror    *yaml.Node
	image                      string
	imagePath                  string
	grace                      *yaml.Node
	gracePath                  string
	replicas                   *int
	meta, pod, runner, sidecar omap
	// sidecarFields are where ARC's docker sidecar settings came from, each
	// listed when the pool has no sidecar to carry it.
	sidecarFields        []sidecarField
	workDir, workDirPath string
	// scaleSet: the draft is a runner scale set's (scaleset.go), named poolBase.
	scaleSet      bool
	poolBase      string
	extra, claims []*yaml.Node

	// container mode (containermode.go)
	containerMode, containerModePath string
	workClaim                        *yaml.Node
	workClaimPath                    string
	requireJobContainer              *bool
	hookTemplate                     *yaml.Node
	hookTemplateFrom                 hookTemplateSource
	jobsNamespace                    string
}

// deployment converts a RunnerDeployment or RunnerSet, with its autoscaler h
// (nil when none), into a draft; nil when it cannot become a pool.
func (c *converter) deployment(d, h *object) *draft {
	dr := &draft{src: d, hra: h, arch: "x64"}
	spec := get(d.node, "spec")
	c.unknown(d, "", d.node, objectFields)
	if d.kind == kindDeployment {
		c.unknown(d, "spec", spec, runnerDeploymentFields)
		tmpl := get(spec, "template")
		c.unknown(d, "spec.template", tmpl, templateFields)
		c.metadata(d, dr, "spec.template.metadata", get(tmpl, "metadata"))
		rs := get(tmpl, "spec")
		c.unknown(d, "spec.template.spec", rs, runnerConfigFields, runnerPodFields)
		c.runnerConfig(d, dr, "spec.template.spec", rs)
		c.runnerPod(d, dr, "spec.template.spec", rs)
	} else {
		c.unknown(d, "spec", spec, runnerConfigFields, statefulSetFields)
		c.runnerConfig(d, dr, "spec", spec)
		c.runnerSet(d, dr, spec)
	}
	dr.replicas = c.intField(d, "spec.replicas", get(spec, "replicas"))
	if h != nil {
		c.autoscaler(h, dr) // reported even when the deployment cannot become a pool
	}
	if !c.scope(d, dr) {
		return nil
	}
	if h == nil {
		c.fixedSize(d, dr)
	}
	c.finish(d, dr)
	return dr
}

// fixedSize: without an autoscaler ARC keeps `replicas` runners (1 by default).
func (c *converter) fixedSize(d *object, dr *draft) {
	n := 1
	if dr.replicas != nil {
		n = *dr.replicas
	}
	dr.min, dr.max = n, &n
	if n < 1 {
		one := 1
		dr.min, dr.max = 0, &one
		c.note(d, "replicas %d and no autoscaler: imported as minReplicas 0, maxReplicas 1 (a pool needs a ceiling of at least 1)", n)
		return
	}
	c.note(d, "no HorizontalRunnerAutoscaler targets it: a fixed size of %d (minReplicas = maxReplicas = %d)", n, n)
}

// scope takes the deployment's scope; false (and dropped) when it has none, or
// one GitHub cannot have (a placeholder such as <owner>/<repo>).
func (c *converter) scope(d *object, dr *draft) bool {
	sc := dr.poolScope()
	err := sc.Validate()
	if err == nil {
		return true
	}
	hra := ""
	if dr.hra != nil {
		hra = " (and its autoscaler " + dr.hra.ref() + ")"
	}
	c.drop(d, "", fmt.Sprintf("%s%s: organization/repository/enterprise: %v", d.ref(), hra, err),
		"set exactly one of organization, repository or enterprise to a real GitHub name (placeholders such as <owner>/<repo> must be filled), then import again")
	return false
}

// metadata carries the pod template's labels and annotations, but not the keys
// that runnerscaler owns (actions-runner/*, runnerscaler.dev/*).
func (c *converter) metadata(o *object, dr *draft, path string, md *yaml.Node) {
	pairs(md, func(k string, v *yaml.Node) {
		if k != "labels" && k != "annotations" {
			return // name, namespace, finalizers of a template mean nothing to a pod
		}
		kept := &yaml.Node{Kind: yaml.MappingNode}
		pairs(v, func(key string, val *yaml.Node) {
			if reserved(key) {
				c.drop(o, fmt.Sprintf("%s.%s[%q]", path, k, key), "the actions-runner/ and runnerscaler.dev/ keys are runnerscaler's own",
					"leave it out: runnerscaler sets its own")
				return
			}
			if k == "annotations" && (key == runnerpod.AnnotationSafeToEvict || key == runnerpod.AnnotationDoNotDisrupt) {
				c.drop(o, fmt.Sprintf("%s.%s[%q]", path, k, key),
					"runnerscaler sets it on a runner's pod while the runner runs a job (safe-to-evict \"false\", do-not-disrupt \"true\") and removes it when the runner is idle; the sweeper refuses a template that sets it",
					"leave it out: an idle runner's node may then be emptied, a busy one's is kept")
				return
			}
			kept.Content = append(kept.Content, str(key), clean(val))
		})
		if len(kept.Content) > 0 {
			dr.meta.set(k, kept)
		}
	})
}

func reserved(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range []string{"actions-runner", "runnerscaler.dev"} {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}
