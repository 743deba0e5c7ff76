package arcimport

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

func (dr *draft) poolScope() scope.Scope {
	return scope.Scope{Enterprise: dr.enterprise, Organization: dr.organization, Repository: dr.repository}
}

// runnerConfig carries ARC's RunnerConfig fields of n (at path).
func (c *converter) runnerConfig(o *object, dr *draft, path string, n *yaml.Node) {
	pairs(n, func(k string, v *yaml.Node) {
		p := join(path, k)
		switch k {
		case "enterprise":
			dr.enterprise = scalar(v)
		case "organization":
			dr.organization = scalar(v)
		case "repository":
			dr.repository = scalar(v)
		case "group":
			dr.group = scalar(v)
		case "labels":
			for _, l := range v.Content {
				dr.labels = append(dr.labels, scalar(l))
			}
		case "ephemeral":
			dr.ephemeral = c.boolField(o, p, v)
		case "image":
			dr.image, dr.imagePath = scalar(v), p
		case "workDir":
			dr.workDir, dr.workDirPath = scalar(v), p
		case "dockerdWithinRunnerContainer":
			dr.dind = c.boolField(o, p, v)
		case "dockerEnabled":
			dr.dockerEnabled = c.boolField(o, p, v)
		case "dockerMTU":
			dr.dockerMTU = v
		case "dockerRegistryMirror":
			dr.dockerMirror = v
		case "volumeSizeLimit", "volumeStorageMedium":
			c.drop(o, p, "ARC's work volume settings: runnerscaler's runners have no work volume of their own",
				fmt.Sprintf("add an emptyDir volume with sizeLimit/medium to kubernetes.template and mount it in the runner container at the work directory (workDir; runnerscaler's image's default is %s)", defaultWorkDir))
		case "containerMode":
			c.legacyContainerMode(o, dr, p, v)
		case "githubAPICredentialsFrom":
			c.drop(o, p, "per-deployment GitHub credentials are not supported: one GitHub App (and a PAT for enterprise pools) serves every pool",
				"install the deployment's GitHub App on this pool's organization or repository")
		}
	})
}

// runnerPod carries ARC's RunnerPodSpec fields of n (at path).
func (c *converter) runnerPod(o *object, dr *draft, path string, n *yaml.Node) {
	pairs(n, func(k string, v *yaml.Node) {
		p := join(path, k)
		switch k {
		case "dockerdContainerResources":
			dr.sidecar.set("resources", clean(v))
			dr.sidecarFields = append(dr.sidecarFields, sidecarField{k, p})
		case "dockerVolumeMounts":
			dr.sidecar.appendSeq("volumeMounts", cleanItems(v)...)
			dr.sidecarFields = append(dr.sidecarFields, sidecarField{k, p})
		case "dockerEnv":
			dr.sidecar.appendSeq("env", c.env(o, p, v, false)...)
			dr.sidecarFields = append(dr.sidecarFields, sidecarField{k, p})
		case "containers":
			c.containers(o, dr, p, v)
		case "sidecarContainers":
			dr.extra = append(dr.extra, cleanItems(v)...)
		case "env":
			dr.runner.appendSeq("env", c.env(o, p, v, true)...)
		case "envFrom", "volumeMounts":
			dr.runner.appendSeq(k, cleanItems(v)...)
		case "resources", "imagePullPolicy":
			dr.runner.set(k, clean(v))
		case "ephemeralContainers":
			c.drop(o, p, "ephemeral containers cannot be part of a pod template", "attach them with kubectl debug when needed")
		case "workVolumeClaimTemplate":
			if !isNull(v) {
				dr.workClaim, dr.workClaimPath = clean(v), p
			}
		default:
			if slices.Contains(runnerPodFields, k) {
				c.podField(o, dr, p, k, v)
			}
		}
	})
}

// podField carries one field of the runner pod's spec.
func (c *converter) podField(o *object, dr *draft, p, k string, v *yaml.Node) {
	switch k {
	case "serviceAccountName", "serviceAccount":
		if sa := scalar(v); dr.scaleSet && (strings.HasSuffix(sa, "-gha-rs-no-permission") || strings.HasSuffix(sa, "-gha-rs-kube-mode")) {
			c.note(o, "%s: %s left out: ARC's chart made it, in ARC's namespace; runnerscaler's runners mount no service account token unless the pool names one", p, sa)
			return
		}
		dr.serviceAccount = scalar(v)
	case "terminationGracePeriodSeconds":
		dr.grace, dr.gracePath = v, p
	case "nodeSelector":
		c.nodeSelector(o, dr, p, v)
	case "topologySpreadConstraint", "topologySpreadConstraints":
		dr.pod.appendSeq("topologySpreadConstraints", cleanItems(v)...)
	case "restartPolicy":
		if dr.scaleSet && scalar(v) == "Never" {
			c.note(o, "%s: ARC's Never left out: a runner's StatefulSet restarts its pod Always, and a finished runner never runs again (its state volume says so)", p)
			return
		}
		if scalar(v) != "Always" {
			c.drop(o, p, fmt.Sprintf("restartPolicy %q: a runner's StatefulSet restarts its pod Always", scalar(v)),
				"leave it out: a finished runner never runs again (its state volume says so)")
		}
	default:
		dr.pod.set(k, clean(v))
	}
}

// nodeSelector carries the selector; kubernetes.io/arch sets the pool's arch
// label, and a Windows node is dropped (runnerscaler's runners are Linux).
func (c *converter) nodeSelector(o *object, dr *draft, p string, v *yaml.Node) {
	kept := &yaml.Node{Kind: yaml.MappingNode}
	pairs(v, func(key string, val *yaml.Node) {
		switch {
		case key == "kubernetes.io/os" && scalar(val) == "windows":
			c.drop(o, fmt.Sprintf("%s[%q]", p, key), "Windows runners are not supported: runnerscaler's runner image and entrypoint are Linux",
				"keep Windows runners on ARC, or run Linux runners")
			return
		case key == "kubernetes.io/arch":
			switch scalar(val) {
			case "amd64":
				dr.arch = "x64"
			case "arm64":
				dr.arch = "arm64"
			case "arm":
				dr.arch = "arm"
			}
		}
		kept.Content = append(kept.Content, str(key), clean(val))
	})
	if len(kept.Content) > 0 {
		dr.pod.set("nodeSelector", kept)
	}
}

// containers merges a container list: `runner` into the runner container,
// `docker` into the docker sidecar, any other as an extra container.
func (c *converter) containers(o *object, dr *draft, p string, v *yaml.Node) {
	if v == nil {
		return
	}
	for i, ct := range v.Content {
		cp := fmt.Sprintf("%s[%d]", p, i)
		switch scalar(get(ct, "name")) {
		case "runner":
			c.mergeContainer(o, dr, cp, &dr.runner, ct, true)
		case "docker":
			c.mergeContainer(o, dr, cp, &dr.sidecar, ct, false)
			dr.sidecarFields = append(dr.sidecarFields, sidecarField{"docker", cp})
		default:
			dr.extra = append(dr.extra, clean(ct))
		}
	}
}

// mergeContainer lays container ct over target: lists (env, volumeMounts,
// envFrom, ports) are appended, other fields replaced.
func (c *converter) mergeContainer(o *object, dr *draft, p string, target *omap, ct *yaml.Node, runner bool) {
	pairs(ct, func(k string, v *yaml.Node) {
		switch k {
		case "name":
		case "env":
			target.appendSeq("env", c.env(o, join(p, k), v, runner)...)
		case "volumeMounts", "envFrom", "ports":
			target.appendSeq(k, cleanItems(v)...)
		case "image":
			if runner {
				dr.image, dr.imagePath = scalar(v), join(p, k)
				return
			}
			target.set(k, clean(v))
		case "command", "args":
			if !runner {
				target.set(k, clean(v))
				return
			}
			c.runnerCommand(o, join(p, k), k, v)
		default:
			target.set(k, clean(v))
		}
	})
}

// env carries an env list: a value that is not a string is written as one
// (Kubernetes takes strings only), and in the runner container the variables
// runnerscaler sets are dropped.
func (c *converter) env(o *object, p string, v *yaml.Node, runner bool) []*yaml.Node {
	if v == nil {
		return nil
	}
	var out []*yaml.Node
	for i, e := range v.Content {
		ep := fmt.Sprintf("%s[%d]", p, i)
		name := scalar(get(e, "name"))
		if _, hooks := hookEnv[name]; runner && hooks {
			c.hookEnv = append(c.hookEnv, hookEnvVar{o: o, path: ep, name: name, item: clean(e)}) // settled with the mode
			continue
		}
		if runner && runnerpod.OwnedEnv(name) {
			c.drop(o, ep, fmt.Sprintf("%s is set by runnerscaler from the pool (or its image)", name), "leave it out")
			continue
		}
		item := clean(e)
		if val := get(item, "value"); val != nil && val.Kind == yaml.ScalarNode && val.Tag != "!!str" && !isNull(val) {
			c.note(o, "%s.value: %s written as the string %q (Kubernetes takes strings only)", ep, val.Value, val.Value)
			val.Tag, val.Style = "!!str", yaml.DoubleQuotedStyle
		}
		out = append(out, item)
	}
	return out
}

func envVar(name, value string) *yaml.Node {
	m := &omap{}
	m.set("name", str(name))
	m.set("value", quoted(value))
	return m.node()
}

func quoted(v string) *yaml.Node {
	n := str(v)
	n.Style = yaml.DoubleQuotedStyle
	return n
}

func cleanItems(v *yaml.Node) []*yaml.Node {
	if v == nil || v.Kind != yaml.SequenceNode {
		return nil
	}
	var out []*yaml.Node
	for _, it := range v.Content {
		out = append(out, clean(it))
	}
	return out
}

// runnerSet carries a RunnerSet's pod template, volume claim templates and
// claim retention.
func (c *converter) runnerSet(o *object, dr *draft, spec *yaml.Node) {
	tmpl := get(spec, "template")
	c.unknown(o, "spec.template", tmpl, templateFields)
	c.metadata(o, dr, "spec.template.metadata", get(tmpl, "metadata"))
	pairs(get(tmpl, "spec"), func(k string, v *yaml.Node) {
		p := "spec.template.spec." + k
		if k == "containers" {
			c.containers(o, dr, p, v)
			return
		}
		c.podField(o, dr, p, k, v)
	})
	dr.claims = cleanItems(get(spec, "volumeClaimTemplates"))
	pairs(get(spec, "persistentVolumeClaimRetentionPolicy"), func(k string, v *yaml.Node) {
		if scalar(v) == "Retain" {
			c.drop(o, "spec.persistentVolumeClaimRetentionPolicy."+k, "Retain: runnerscaler deletes a runner's claims with the runner",
				"keep data that must outlive runners outside the claims (a cache volume of its own, an object store)")
		}
	})
}

func (c *converter) boolField(o *object, p string, v *yaml.Node) *bool {
	if isNull(v) {
		return nil
	}
	var b bool
	if err := v.Decode(&b); err != nil {
		c.drop(o, p, fmt.Sprintf("%q is not a boolean", v.Value), "write true or false")
		return nil
	}
	return &b
}

func (c *converter) intField(o *object, p string, v *yaml.Node) *int {
	if isNull(v) {
		return nil
	}
	n, err := strconv.Atoi(v.Value)
	if err != nil || v.Kind != yaml.ScalarNode {
		c.drop(o, p, fmt.Sprintf("%q is not a whole number", v.Value), "write a number")
		return nil
	}
	return &n
}

// runnerCommand: runnerscaler's image starts the runner from its entrypoint
// (the JIT config, the job report, the graceful stop), which a command would
// replace and which takes no arguments. ARC's chart's own command, its image's
// run.sh, is what the entrypoint starts: said in a note.
func (c *converter) runnerCommand(o *object, p, k string, v *yaml.Node) {
	if k == "command" && len(contentOf(v)) == 1 && scalar(v.Content[0]) == arcRunCommand {
		c.note(o, "%s: ARC's %s left out: runnerscaler's image's entrypoint starts the runner", p, arcRunCommand)
		return
	}
	if k == "command" {
		c.drop(o, p, "a command replaces runnerscaler's entrypoint (JIT config, job report, graceful stop)",
			"build what it does into the image (runner/Dockerfile), or run it as a job step")
		return
	}
	c.drop(o, p, "runnerscaler's entrypoint takes no arguments", "leave them out; set what they set in the runner's env or the image")
}
