package arcimport

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// ARC's container modes become a pool's (kubernetes.containerMode): legacy
// RunnerDeployments' and RunnerSets' containerMode kubernetes with its
// workVolumeClaimTemplate, scale sets' containerMode.type kubernetes or
// kubernetes-novolume with kubernetesModeWorkVolumeClaim, and what ARC users
// write in the runner pod's template instead (the hooks' environment, a `work`
// volume, a hook template from a ConfigMap). What runnerscaler renders itself —
// the hooks' environment and the work volume — is left out of the template,
// with a note; the service account and the jobs namespace are named after the
// pool and its namespace (hookAccounts).

// hookEnvVar is a variable of the container hooks in the runner container's
// env, held back while the object is read (env) and settled once its mode is
// known (settleContainerMode).
type hookEnvVar struct {
	o          *object
	path, name string
	item       *yaml.Node
}

// hookEnv says, for each variable of the container hooks, what takes its
// place in a container mode pool.
var hookEnv = map[string]string{
	"ACTIONS_RUNNER_CONTAINER_HOOKS":         "runnerscaler sets it from kubernetes.containerMode (the hooks its runner image carries)",
	"ACTIONS_RUNNER_POD_NAME":                "runnerscaler sets it (the runner pod's name)",
	"ACTIONS_RUNNER_KUBERNETES_NAMESPACE":    "runnerscaler sets it (the pool's workflow pod namespace)",
	"ACTIONS_RUNNER_CLAIM_NAME":              "runnerscaler sets it (the claim of its work volume)",
	"ACTIONS_RUNNER_IMAGE":                   "runnerscaler sets it (the runner's image)",
	"ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE": "runnerscaler sets it from kubernetes.hookTemplate",
	"ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER":   "carried as kubernetes.requireJobContainer",
}

const (
	envHooks        = "ACTIONS_RUNNER_CONTAINER_HOOKS"
	envHookTemplate = "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE"
	envRequireJob   = "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER"
	// workVolumeName is the volume ARC (and runnerscaler) give the work
	// directory in kubernetes mode.
	workVolumeName = "work"
	// experimentalTemplateKey is the key of the experimental chart's hook
	// template (runner.kubernetesMode.extensionRef, mounted as hook-template.yaml).
	experimentalTemplateKey = "hook-template.yaml"
)

// defaultWorkClaim is the claim given to a kubernetes mode pool whose ARC
// manifest names none (ARC then used a `work` volume of the template's): the
// cluster's default StorageClass, ReadWriteOnce, 10Gi.
func defaultWorkClaim() *yaml.Node {
	storage := &omap{}
	storage.set("storage", str("10Gi"))
	requests := &omap{}
	requests.set("requests", storage.node())
	modes := seq(str("ReadWriteOnce"))
	modes.Style = yaml.FlowStyle
	claim := &omap{}
	claim.set("accessModes", modes)
	claim.set("resources", requests.node())
	return claim.node()
}

// legacyContainerMode reads a RunnerDeployment's or RunnerSet's containerMode:
// ARC's legacy runners know kubernetes alone.
func (c *converter) legacyContainerMode(o *object, dr *draft, p string, v *yaml.Node) {
	switch mode := scalar(v); mode {
	case "":
	case pool.ContainerModeKubernetes:
		dr.containerMode, dr.containerModePath = mode, p
	default:
		c.drop(o, p, fmt.Sprintf("containerMode %q: ARC's legacy runners know kubernetes only", mode),
			"set containerMode: kubernetes, or leave it out to run container jobs with docker")
	}
}

// scaleSetContainerMode reads a values file's containerMode; true for dind.
func (c *converter) scaleSetContainerMode(o *object, dr *draft, p string, v *yaml.Node) bool {
	c.unknown(o, p, v, containerModeFields)
	mode := scalar(get(v, "type"))
	switch mode {
	case "", "none", "dind": // dind: said with the docker sidecar (finish.go)
	case pool.ContainerModeKubernetes, pool.ContainerModeNoVolume:
		dr.containerMode, dr.containerModePath = mode, p+".type"
	default:
		c.drop(o, p+".type", fmt.Sprintf("containerMode %q is none of ARC's (dind, kubernetes, kubernetes-novolume)", mode),
			"set one of them and import again")
	}
	pairs(v, func(k string, val *yaml.Node) {
		kp := p + "." + k
		switch {
		case k == "kubernetesModeWorkVolumeClaim" && !isNull(val):
			dr.workClaim, dr.workClaimPath = clean(val), kp
		case (k == "kubernetesModeAdditionalRoleRules" || k == "kubernetesModeAdditionalRoleRule") && len(contentOf(val)) > 0:
			c.drop(o, kp, "more rules for the hooks' Role: runnerscaler hook-rbac grants the hooks exactly the verbs they check, in the pool's workflow pod namespace",
				"if the runner process needs these rights, bind a Role of your own with them to the pool's service account (<pool>-hooks)")
		case k == "kubernetesModeServiceAccount" && !isNull(val) && !emptyValue(val):
			c.drop(o, kp, "the annotations of the service account ARC's chart made for the hooks: the pool names its own (<pool>-hooks), made by runnerscaler hook-rbac",
				"put them on that service account (an IAM role's eks.amazonaws.com/role-arn, say)")
		}
	})
	return mode == "dind"
}

// experimentalRunner reads the experimental chart's runner.kubernetesMode: the
// hook template, given inline (extension.yaml) or as a ConfigMap
// (extensionRef); its other settings are left out.
func (c *converter) experimentalRunner(o *object, dr *draft, p string, v *yaml.Node) {
	pairs(v, func(k string, val *yaml.Node) {
		if k != "kubernetesMode" {
			c.drop(o, join(p, k), "a setting of ARC's experimental chart that runnerscaler does not read", "set its equivalent in the pool (docs/configuration.md)")
			return
		}
		pairs(val, func(km string, kv *yaml.Node) {
			kp := join(p, "kubernetesMode."+km)
			switch km {
			case "extension":
				if text := scalar(get(kv, "yaml")); text != "" {
					dr.hookTemplateFrom = hookTemplateSource{path: kp + ".yaml", inline: text}
				}
			case "extensionRef":
				if name := scalar(kv); name != "" {
					dr.hookTemplateFrom = hookTemplateSource{path: kp, configMap: name, key: experimentalTemplateKey}
				}
			case "hookPath":
				c.note(o, "%s: the pool runs the hooks its runner image carries, for its container mode", kp)
			default:
				c.drop(o, kp, "a setting of ARC's experimental chart that runnerscaler does not read", "leave it out")
			}
		})
	})
}

// hookTemplateSource is where ARC's runners read their hook template: inline
// text, or a ConfigMap's key (mounted in the runner container).
type hookTemplateSource struct {
	path            string // where the input says so
	inline          string
	configMap, key  string
	volume, mountAt string // the template's volume and its mount, left out
}

// settleContainerMode settles the pool's container mode once the object is
// read: the hooks' environment, the mode ARC users set through it, docker
// (none), the work volume and its claim, and the hook template.
func (c *converter) settleContainerMode(d *object, dr *draft) {
	held := c.heldHookEnv(d)
	if dr.containerMode == "" {
		dr.containerMode = modeFromEnv(held)
		if dr.containerMode != "" {
			dr.containerModePath = envPath(held, envHooks)
			c.note(d, "%s: %s is set: the runner ran container jobs through the container hooks, so the pool is in containerMode %s",
				dr.containerModePath, envHooks, dr.containerMode)
		}
	}
	if dr.containerMode == "" {
		for _, h := range held {
			c.drop(d, h.path, fmt.Sprintf("%s is a setting of the container hooks, which runnerscaler sets in a container mode only (kubernetes.containerMode)", h.name),
				"leave it out, or set kubernetes.containerMode")
		}
		return
	}
	c.note(d, "%s: containerMode %s: the pool's container jobs run as workflow pods that the container hooks create (docs/container-modes.md)",
		dr.containerModePath, dr.containerMode)
	for _, h := range held {
		c.note(d, "%s: %s left out of the template: %s", h.path, h.name, hookEnv[h.name])
		switch h.name {
		case envRequireJob:
			b := slices.Contains([]string{"1", "true", "$true"}, strings.ToLower(scalar(get(h.item, "value")))) // the runner's ConvertToBoolean
			dr.requireJobContainer = &b
		case envHookTemplate:
			if dr.hookTemplateFrom.inline == "" && dr.hookTemplateFrom.configMap == "" {
				dr.hookTemplateFrom = c.mountedTemplate(dr, h)
			}
		}
	}
	if r := dr.requireJobContainer; r != nil && !*r && dr.containerMode == pool.ContainerModeKubernetes {
		c.note(d, "%s=false not carried: containerMode kubernetes requires a job container here (a job without one would run its steps "+
			"beside the hooks' service account token, which reaches every pod of the runners' namespace); jobs without `container:` fail; "+
			"to run them, convert the pool to containerMode kubernetes-novolume", envRequireJob)
		dr.requireJobContainer = nil
	}
	c.noDockerInContainerMode(d, dr)
	c.workVolume(d, dr)
	c.hookTemplate(d, dr)
}

// heldHookEnv takes the hook variables held back from o's runner container.
func (c *converter) heldHookEnv(o *object) []hookEnvVar {
	var mine, others []hookEnvVar
	for _, h := range c.hookEnv {
		if h.o == o {
			mine = append(mine, h)
		} else {
			others = append(others, h)
		}
	}
	c.hookEnv = others
	return mine
}

// modeFromEnv: ACTIONS_RUNNER_CONTAINER_HOOKS names the hooks ARC's runner
// image carries for a mode (/home/runner/k8s-novolume/index.js for
// kubernetes-novolume; any other, /home/runner/k8s/index.js, kubernetes).
func modeFromEnv(held []hookEnvVar) string {
	for _, h := range held {
		if h.name != envHooks {
			continue
		}
		if strings.Contains(scalar(get(h.item, "value")), "k8s-novolume") {
			return pool.ContainerModeNoVolume
		}
		return pool.ContainerModeKubernetes
	}
	return ""
}

func envPath(held []hookEnvVar, name string) string {
	for _, h := range held {
		if h.name == name {
			return h.path
		}
	}
	return ""
}

// noDockerInContainerMode: a container mode pool runs no docker (package pool
// refuses it with one).
func (c *converter) noDockerInContainerMode(d *object, dr *draft) {
	if sidecar, dind := dr.docker(); (sidecar && dr.dockerEnabled != nil) || dind {
		c.note(d, "%s: containerMode %s runs no docker: the pool's dockerEnabled and dockerdWithinRunnerContainer are left out",
			dr.containerModePath, dr.containerMode)
	}
	no := false
	dr.dockerEnabled, dr.dind = &no, &no
}

// workVolume: in kubernetes mode runnerscaler renders the `work` volume (an
// ephemeral claim from workVolumeClaim, at the work directory) itself, so the
// template's is left out; a claim template of ARC's `work` volume becomes the
// pool's claim, and with none the pool gets defaultWorkClaim.
func (c *converter) workVolume(d *object, dr *draft) {
	vol := namedItem(dr.pod.get("volumes"), workVolumeName)
	if dr.containerMode != pool.ContainerModeKubernetes {
		if dr.workClaim != nil {
			c.drop(d, dr.workClaimPath, "kubernetes-novolume mode shares no volume with the workflow pods: the hooks copy the workspace", "leave it out")
			dr.workClaim = nil
		}
		return
	}
	volumesPath := specPath(d, "volumes")
	if dr.scaleSet {
		volumesPath = scaleSetPath(d, "template.spec.volumes")
	}
	if vol != nil {
		claim := get(get(get(vol, "ephemeral"), "volumeClaimTemplate"), "spec")
		switch {
		case claim != nil && dr.workClaim == nil:
			dr.workClaim, dr.workClaimPath = clean(claim), volumesPath
			c.note(d, "%s: the work volume's claim template becomes kubernetes.workVolumeClaim; runnerscaler renders the volume itself", volumesPath)
		case claim != nil:
			c.note(d, "%s: the template's work volume left out: runnerscaler renders it from kubernetes.workVolumeClaim", volumesPath)
		default:
			c.drop(d, volumesPath+"[work]", "the template's own work volume (no ephemeral claim): in kubernetes mode runnerscaler renders the work volume, "+
				"an ephemeral claim that the runner shares with its workflow pods", "set kubernetes.workVolumeClaim to the claim the work directory needs")
		}
		dr.pod.without("volumes", workVolumeName)
	}
	if mounts := dr.runner.get("volumeMounts"); namedItem(mounts, workVolumeName) != nil {
		dr.runner.without("volumeMounts", workVolumeName)
		c.note(d, "the runner container's work mount left out: runnerscaler mounts its work volume at %s", defaultWorkDir)
	}
	if dr.workClaim == nil {
		dr.workClaim = defaultWorkClaim()
		c.drop(d, dr.containerModePath, "containerMode kubernetes without a work volume claim (kubernetesModeWorkVolumeClaim, workVolumeClaimTemplate)",
			"imported with a 10Gi ReadWriteOnce claim of the cluster's default StorageClass: set kubernetes.workVolumeClaim to what the jobs need")
		return
	}
	if scalar(get(get(get(dr.workClaim, "resources"), "requests"), "storage")) == "" {
		claim := fromMapping(dr.workClaim)
		resources := fromMapping(claim.get("resources"))
		requests := fromMapping(resources.get("requests"))
		requests.set("storage", str("10Gi"))
		resources.set("requests", requests.node())
		claim.set("resources", resources.node())
		dr.workClaim = claim.node()
		c.drop(d, dr.workClaimPath, "a claim without a size (resources.requests.storage), which Kubernetes refuses",
			"imported with 10Gi: set the size the jobs need")
	}
}

// namedItem is the item of sequence s named name, or nil.
func namedItem(s *yaml.Node, name string) *yaml.Node {
	for _, it := range contentOf(s) {
		if scalar(get(it, "name")) == name {
			return it
		}
	}
	return nil
}

// mountedTemplate finds the hook template that ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE
// names as ARC users provide it: a ConfigMap volume mounted in the runner
// container at the file's directory (or at the file, with subPath).
func (c *converter) mountedTemplate(dr *draft, h hookEnvVar) hookTemplateSource {
	file := scalar(get(h.item, "value"))
	src := hookTemplateSource{path: h.path}
	for _, m := range contentOf(dr.runner.get("volumeMounts")) {
		at := path.Clean(scalar(get(m, "mountPath")))
		key := ""
		switch {
		case at == path.Clean(file) && scalar(get(m, "subPath")) != "":
			key = scalar(get(m, "subPath"))
		case path.Dir(path.Clean(file)) == at:
			key = path.Base(file)
		default:
			continue
		}
		vol := namedItem(dr.pod.get("volumes"), scalar(get(m, "name")))
		cm := get(vol, "configMap")
		if cm == nil {
			continue
		}
		for _, it := range contentOf(get(cm, "items")) { // a key projected under another file name
			if scalar(get(it, "path")) == key {
				key = scalar(get(it, "key"))
			}
		}
		src.configMap, src.key = scalar(get(cm, "name")), key
		src.volume, src.mountAt = scalar(get(vol, "name")), at
		return src
	}
	src.key = file // in the image, or a volume that is not a ConfigMap
	return src
}

// hookTemplate carries the hook template when its content is in the input
// (inline, or a ConfigMap of the input); otherwise a note says where to paste
// it from. The ConfigMap's volume and mount are left out: runnerscaler writes
// the pool's hookTemplate where the hooks read it.
func (c *converter) hookTemplate(d *object, dr *draft) {
	src := dr.hookTemplateFrom
	if src.path == "" {
		return
	}
	if src.volume != "" {
		dr.pod.without("volumes", src.volume)
		dr.runner.without("volumeMounts", src.volume)
		c.note(d, "the hook template's volume %s (ConfigMap %s, at %s) left out: runnerscaler writes kubernetes.hookTemplate where the hooks read it",
			src.volume, src.configMap, src.mountAt)
	}
	text := src.inline
	if src.configMap != "" {
		text = c.configMapData(src.configMap, src.key)
	}
	if text == "" {
		where := fmt.Sprintf("ConfigMap %s's key %s", src.configMap, src.key)
		if src.configMap == "" {
			where = "the file " + src.key
		}
		c.note(d, "%s: the hook template is not in the input: paste %s (kubectl get configmap -o yaml) into the pool's kubernetes.hookTemplate", src.path, where)
		return
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(text), &n); err != nil || len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
		c.drop(d, src.path, "the hook template is not a YAML mapping (a pod template)", "write it as a pod template in kubernetes.hookTemplate")
		return
	}
	dr.hookTemplate = clean(n.Content[0])
	c.note(d, "%s: the hook template becomes kubernetes.hookTemplate", src.path)
}

// configMapData is the key of the input's ConfigMap name, or "".
func (c *converter) configMapData(name, key string) string {
	cm, ok := c.configMaps[name]
	if !ok {
		return ""
	}
	c.used[cm] = true
	data := get(cm.node, "data")
	if v := scalar(get(data, key)); v != "" {
		return v
	}
	if len(contentOf(data)) == 2 { // a ConfigMap of one key
		return scalar(data.Content[1])
	}
	return ""
}

// hookAccounts names, once pools have their names, each container mode pool's
// service account (<pool>-hooks) and a kubernetes-novolume pool's jobs
// namespace (<namespace>-jobs): ARC's chart made its own in ARC's namespace,
// which the pool's namespace does not have.
func hookAccounts(c *converter, drafts []*draft) {
	for _, dr := range drafts {
		if dr.containerMode == "" {
			continue
		}
		was := ""
		if dr.serviceAccount != "" {
			was = fmt.Sprintf(" (ARC's %s is not used: it holds ARC's rights in ARC's namespace)", dr.serviceAccount)
		}
		dr.serviceAccount = dr.name + "-hooks"
		ns := dr.namespace
		if dr.containerMode == pool.ContainerModeNoVolume {
			dr.jobsNamespace = shorten(ns+"-jobs", 63)
			ns = dr.jobsNamespace
			c.note(dr.src, "pool %s: its workflow pods run in the jobs namespace %s, apart from the runners: create it (kubectl create namespace %s)",
				dr.name, dr.jobsNamespace, dr.jobsNamespace)
		}
		c.note(dr.src, "pool %s: serviceAccountName %s%s: the container hooks run as it; create it and its Role (the hooks' rights in namespace %s) with runnerscaler hook-rbac",
			dr.name, dr.serviceAccount, was, ns)
	}
}
