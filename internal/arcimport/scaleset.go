package arcimport

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// ARC's runner scale sets (ARC 0.4 and later, the gha-runner-scale-set Helm
// chart): an AutoscalingRunnerSet object, or the chart's values file that
// renders one.
const (
	scaleSetAPIVersion   = "actions.github.com/v1alpha1"
	kindScaleSet         = "AutoscalingRunnerSet"
	kindValues           = "gha-runner-scale-set values"
	defaultScaleSetImage = "ghcr.io/actions/actions-runner:latest"
	// arcRunCommand is the runner container's command in the chart's default
	// values: ARC's image's runner, which runnerscaler's entrypoint starts itself.
	arcRunCommand = "/home/runner/run.sh"
)

var (
	// valuesFields are the gha-runner-scale-set chart's values (its
	// values.yaml); `USER-SUPPLIED VALUES` is the first line `helm get values`
	// prints without -o yaml.
	valuesFields = []string{"githubConfigUrl", "githubConfigSecret", "scaleSetLabels", "proxy", "maxRunners", "minRunners",
		"runnerGroup", "runnerScaleSetName", "githubServerTLS", "keyVault", "containerMode", "listenerTemplate", "listenerMetrics",
		"template", "controllerServiceAccount", "namespaceOverride", "annotations", "labels", "resourceMeta", "runner", "USER-SUPPLIED VALUES"}
	// valuesMarkers are the values whose presence makes a document without a
	// kind a values file.
	valuesMarkers = []string{"githubConfigUrl", "githubConfigSecret", "runnerScaleSetName", "scaleSetLabels", "minRunners", "maxRunners", "containerMode"}
	// scaleSetSpecFields are the AutoscalingRunnerSet's spec (its CRD).
	scaleSetSpecFields = []string{"autoscalingListener", "ephemeralRunnerConfigSecretMetadata", "ephemeralRunnerMetadata",
		"ephemeralRunnerSetMetadata", "githubConfigSecret", "githubConfigUrl", "githubServerTLS", "listenerConfigSecretMetadata",
		"listenerMetrics", "listenerRoleBindingMetadata", "listenerRoleMetadata", "listenerServiceAccountMetadata", "listenerTemplate",
		"maxRunners", "minRunners", "proxy", "runnerGroup", "runnerScaleSetLabels", "runnerScaleSetName", "template", "vaultConfig"}
	containerModeFields = []string{"type", "kubernetesModeWorkVolumeClaim", "kubernetesModeAdditionalRoleRules",
		"kubernetesModeAdditionalRoleRule", "kubernetesModeServiceAccount"}
)

// isValues: a document without apiVersion and kind that sets a value of the
// gha-runner-scale-set chart.
func isValues(o *object) bool {
	return o.kind == "" && o.apiVersion == "" && slices.ContainsFunc(valuesMarkers, func(k string) bool { return get(o.node, k) != nil })
}

// whatScaleSetsAreNot lists the fields of a scale set that a pool does not
// carry, each with what replaces it here.
var whatScaleSetsAreNot = map[string][2]string{
	"githubConfigSecret": {"ARC's GitHub credentials (a PAT, a GitHub App, or a Secret's name): the stack has its own, one GitHub App for organizations and repositories (a PAT for enterprises) serving every pool",
		"install the stack's GitHub App on %s (docs/getting-started.md#1-create-the-github-app), or for an enterprise give the stack's PAT the enterprise runner scope"},
	"listenerTemplate": {"the listener's pod: runnerscaler has no listener, GitHub's workflow_job deliveries reach the webhook function",
		"nothing: subscribe the stack's GitHub App to Workflow job events (docs/github-app.md)"},
	"listenerMetrics": {"the listener's metrics: runnerscaler has no listener",
		"runnerscaler's metrics and alarms are in CloudWatch (docs/operations.md#metrics-alarms-dashboard); runnerscaler status shows the pools"},
	"controllerServiceAccount": {"ARC's controller's service account: runnerscaler's sweeper uses the role of infra/rbac.yaml",
		"nothing: apply infra/rbac.yaml (and infra/rbac-docker.yaml for docker pools)"},
	"proxy": {"ARC's proxy settings for the controller, the listener and the runners",
		"for the runners, set HTTP_PROXY, HTTPS_PROXY and NO_PROXY in the runner container's env (kubernetes.template); the Lambdas reach GitHub through their VPC's egress"},
	"githubServerTLS": {"ARC's CA certificate for a GitHub server with a self-signed certificate",
		"mount the CA in the runner container (a configMap volume in kubernetes.template) and set NODE_EXTRA_CA_CERTS to it; the Lambdas need it too"},
	"keyVault": {"ARC's key vault for the GitHub credentials",
		"the stack reads its GitHub App key and PAT from Secrets Manager (docs/getting-started.md#6-fill-the-secrets)"},
	"vaultConfig": {"ARC's key vault for the GitHub credentials",
		"the stack reads its GitHub App key and PAT from Secrets Manager (docs/getting-started.md#6-fill-the-secrets)"},
}

// scaleSet converts an AutoscalingRunnerSet, or a gha-runner-scale-set values
// file, into a draft; nil when it cannot become a pool.
func (c *converter) scaleSet(o *object) *draft {
	dr := &draft{src: o, arch: "x64", scaleSet: true}
	spec, at := o.node, ""
	if o.kind == kindScaleSet {
		c.unknown(o, "", o.node, objectFields)
		spec, at = get(o.node, "spec"), "spec."
		c.unknown(o, "spec", spec, scaleSetSpecFields)
	} else {
		c.unknown(o, "", spec, valuesFields)
	}
	docker := false
	pairs(spec, func(k string, v *yaml.Node) {
		p := at + k
		switch k {
		case "runnerScaleSetLabels", "scaleSetLabels":
			for _, l := range contentOf(v) {
				dr.labels = append(dr.labels, scalar(l))
			}
		case "runnerGroup":
			if g := scalar(v); !strings.EqualFold(g, "default") {
				dr.group = g
			}
		case "minRunners":
			if n := c.intField(o, p, v); n != nil {
				dr.min = max(*n, 0)
				c.note(o, "minRunners %d → minReplicas %d: both keep that many idle runners on top of one per waiting job (desired = minReplicas + the waiting jobs' reservations, up to maxReplicas); "+
					"headroom is something else: placeholder pods that keep node capacity, not runners", *n, dr.min)
			}
		case "maxRunners":
			dr.max = c.intField(o, p, v)
		case "containerMode":
			docker = c.scaleSetContainerMode(o, dr, p, v)
		case "runner": // the experimental chart's
			c.experimentalRunner(o, dr, p, v)
		case "template":
			docker = c.scaleSetTemplate(o, dr, p, v) || docker
		default:
			if not, ok := whatScaleSetsAreNot[k]; ok && !isNull(v) && !emptyValue(v) {
				c.drop(o, p, not[0], strings.ReplaceAll(not[1], "%s", ownerOf(scalar(get(spec, "githubConfigUrl")))))
			}
		}
	})
	dr.dockerEnabled = &docker
	name, named := c.scaleSetName(o, spec)
	if scoped := c.configURL(o, dr, at+"githubConfigUrl", scalar(get(spec, "githubConfigUrl"))); !named || !scoped {
		return nil
	}
	dr.poolBase = name
	dr.labels = append([]string{name}, dr.labels...)
	c.note(o, "runs-on: %s keeps working: the pool's runners have the label %s (and the scale set's other labels). "+
		"They also have the labels every self-hosted runner has (self-hosted, linux, %s), which a scale set's runners do not: "+
		"a job whose runs-on asks only for those may now be taken by this pool; give such jobs a label of their own", name, name, dr.arch)
	c.scaleSetCeiling(o, dr, at+"maxRunners")
	c.finish(o, dr)
	return dr
}

func emptyValue(v *yaml.Node) bool {
	return (v.Kind == yaml.ScalarNode && v.Value == "") || (v.Kind != yaml.ScalarNode && len(v.Content) == 0)
}

// ownerOf is the account a githubConfigUrl names, for a hint.
func ownerOf(u string) string {
	if sc, _, err := parseConfigURL(u); err == nil {
		return sc.Owner()
	}
	return "the scale set's organization or repository"
}

// scaleSetName is the scale set's name, the label its jobs' runs-on names:
// runnerScaleSetName; an AutoscalingRunnerSet without it is named after
// itself, a values file after its Helm release (Options.Release).
func (c *converter) scaleSetName(o *object, spec *yaml.Node) (string, bool) {
	if n := scalar(get(spec, "runnerScaleSetName")); n != "" {
		return n, true
	}
	if o.kind == kindScaleSet && o.name != "" {
		return o.name, true
	}
	if c.opts.Release != "" {
		c.note(o, "runnerScaleSetName not set: the scale set is named after its Helm release, %s (--release)", c.opts.Release)
		return c.opts.Release, true
	}
	c.drop(o, "", fmt.Sprintf("%s: runnerScaleSetName is not set: ARC names the scale set after its Helm release, which a values file does not say, "+
		"and the name is the label its jobs' runs-on names", o.ref()),
		"import again with --release RELEASE (helm list -A shows it), or set runnerScaleSetName")
	return "", false
}

// configURL takes the scale set's scope from githubConfigUrl: an
// organization, a repository or an enterprise, on github.com or a GitHub
// Enterprise Server (said in a note: the stack serves one GitHub).
func (c *converter) configURL(o *object, dr *draft, p, u string) bool {
	sc, host, err := parseConfigURL(u)
	if err == nil {
		err = sc.Validate()
	}
	if err != nil {
		c.drop(o, "", fmt.Sprintf("%s: %s: %v", o.ref(), p, err),
			"set githubConfigUrl to the organization, repository or enterprise the runners register at (https://github.com/ORG, https://github.com/ORG/REPO, https://github.com/enterprises/ENTERPRISE), then import again")
		return false
	}
	dr.enterprise, dr.organization, dr.repository = sc.Enterprise, sc.Organization, sc.Repository
	if host != "github.com" {
		c.note(o, "githubConfigUrl is on %s, not github.com: one stack serves one GitHub; deploy it with GitHubApiUrl https://%s/api/v3/ (a GitHub Enterprise Server's API) and the App created there", host, host)
	}
	return true
}

// parseConfigURL reads a githubConfigUrl: https://HOST/ORG, HOST/ORG/REPO or
// HOST/enterprises/ENTERPRISE.
func parseConfigURL(u string) (scope.Scope, string, error) {
	if strings.TrimSpace(u) == "" {
		return scope.Scope{}, "", fmt.Errorf("empty: the chart requires it")
	}
	parsed, err := url.Parse(u)
	if err != nil || parsed.Host == "" || (parsed.Scheme != "https" && parsed.Scheme != "http") {
		return scope.Scope{}, "", fmt.Errorf("%q is not a URL like https://github.com/ORG", u)
	}
	host := strings.TrimPrefix(strings.ToLower(parsed.Hostname()), "www.")
	parts := strings.Split(strings.Trim(path.Clean(parsed.Path), "/"), "/")
	switch {
	case len(parts) == 2 && parts[0] == "enterprises":
		return scope.Scope{Enterprise: parts[1]}, host, nil
	case len(parts) == 1 && parts[0] != "" && parts[0] != ".":
		return scope.Scope{Organization: parts[0]}, host, nil
	case len(parts) == 2:
		return scope.Scope{Repository: parts[0] + "/" + parts[1]}, host, nil
	}
	return scope.Scope{}, "", fmt.Errorf("%q names no organization, repository or enterprise", u)
}

// ARC's rendering of containerMode dind in an AutoscalingRunnerSet's
// template: the dind container (a native sidecar in initContainers, or a
// container), the init container that copies the runner's externals for it,
// their volumes, and the runner's docker settings.
var (
	arcDindContainers = []string{"dind", "init-dind-externals"}
	arcDindVolumes    = []string{"dind-sock", "dind-externals"}
	arcDindEnv        = []string{"DOCKER_HOST", "RUNNER_WAIT_FOR_DOCKER_IN_SECONDS"}
)

// scaleSetTemplate carries the runner pod's template; true when it is ARC's
// rendering of containerMode dind, which becomes runnerscaler's docker
// sidecar.
func (c *converter) scaleSetTemplate(o *object, dr *draft, p string, tmpl *yaml.Node) bool {
	c.unknown(o, p, tmpl, templateFields)
	c.metadata(o, dr, p+".metadata", get(tmpl, "metadata"))
	spec := get(tmpl, "spec")
	dind := slices.ContainsFunc(slices.Concat(contentOf(get(spec, "containers")), contentOf(get(spec, "initContainers"))),
		func(ct *yaml.Node) bool { return scalar(get(ct, "name")) == "dind" })
	if dind {
		c.note(o, "%s: ARC's dind container (containerMode dind) and what goes with it (%s, volumes %s, the runner's %s) become runnerscaler's docker sidecar",
			p, strings.Join(arcDindContainers, ", "), strings.Join(arcDindVolumes, ", "), strings.Join(arcDindEnv, ", "))
	}
	pairs(spec, func(k string, v *yaml.Node) {
		sp := p + ".spec." + k
		switch {
		case k == "containers":
			c.containers(o, dr, sp, withoutNamed(v, dind, arcDindContainers))
		case k == "initContainers":
			if v = withoutNamed(v, dind, arcDindContainers); len(contentOf(v)) > 0 {
				c.podField(o, dr, sp, k, v)
			}
		case k == "volumes":
			if v = withoutNamed(v, dind, arcDindVolumes); len(contentOf(v)) > 0 {
				c.podField(o, dr, sp, k, v)
			}
		default:
			c.podField(o, dr, sp, k, v)
		}
	})
	if dind {
		dr.runner.filterSeq("env", arcDindEnv)
		dr.runner.filterSeq("volumeMounts", arcDindVolumes)
	}
	return dind
}

// withoutNamed is sequence v without the items named one of names, when drop.
func withoutNamed(v *yaml.Node, drop bool, names []string) *yaml.Node {
	if !drop || v == nil || v.Kind != yaml.SequenceNode {
		return v
	}
	out := seq()
	for _, it := range v.Content {
		if !slices.Contains(names, scalar(get(it, "name"))) {
			out.Content = append(out.Content, it)
		}
	}
	return out
}

// scaleSetCeiling: ARC's maxRunners is optional (no ceiling), a pool's
// maxReplicas is not.
func (c *converter) scaleSetCeiling(o *object, dr *draft, p string) {
	if dr.max == nil {
		m := max(dr.min, 1)
		dr.max = &m
		c.drop(o, p, "not set: ARC has no ceiling, runnerscaler requires one",
			fmt.Sprintf("set maxReplicas to your real ceiling: imported as %d (minRunners, at least 1)", m))
	}
	if *dr.max < 1 {
		one := 1
		c.drop(o, p, fmt.Sprintf("%d: a pool needs a ceiling of at least 1", *dr.max), "imported as 1")
		dr.max = &one
	}
	if dr.min > *dr.max {
		c.drop(o, strings.TrimSuffix(p, "maxRunners")+"minRunners", fmt.Sprintf("%d is over maxRunners %d", dr.min, *dr.max), fmt.Sprintf("imported as %d", *dr.max))
		dr.min = *dr.max
	}
}
