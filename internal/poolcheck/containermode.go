package poolcheck

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// dindImageProblems: a pool in container mode runs no docker, so an image built
// to run dockerd (a docker-in-docker image, named so by its repository or tag,
// as ARC's summerwind/actions-runner-dind, docker:dind and runner/Dockerfile's
// DIND=true build, runner-dind, are) is a pool meant for docker: refused at the
// image, in the pool's image and in every container of its template.
func dindImageProblems(p *pool.Pool, at *yaml.Node, prefix string) []*pool.Problem {
	if !p.Kubernetes.InContainerMode() {
		return nil
	}
	fields := []string{"kubernetes.image"}
	for _, list := range []string{"containers", "initContainers"} {
		items := value(at, "kubernetes", "template", "spec", list)
		if items == nil || items.Kind != yaml.SequenceNode {
			continue
		}
		for i := range items.Content {
			fields = append(fields, fmt.Sprintf("kubernetes.template.spec.%s[%d].image", list, i))
		}
	}
	var out []*pool.Problem
	for _, field := range fields {
		img := value(at, strings.FieldsFunc(field, func(r rune) bool { return r == '.' || r == '[' || r == ']' })...)
		if img == nil || img.Kind != yaml.ScalarNode || !IsDindImage(img.Value) {
			continue
		}
		n, _ := pool.Locate(at, field)
		out = append(out, pool.NewProblem(n, fmt.Sprintf("%s (%s)", prefix, p.Name), prefix+"."+field,
			fmt.Sprintf("%s: %q is a docker-in-docker image, and containerMode %s runs no docker (the hooks create the job's containers as pods); "+
				"use a runner image without dockerd (runner/Dockerfile without DIND=true)", field, img.Value, p.Kubernetes.ContainerMode)))
	}
	return out
}

// IsDindImage reports whether the image reference names a docker-in-docker
// image: "dind" in its last path element, the repository's name or its tag
// (summerwind/actions-runner-dind:latest, docker:27-dind, runner-dind).
func IsDindImage(ref string) bool {
	ref, _, _ = strings.Cut(ref, "@")
	return strings.Contains(strings.ToLower(ref[strings.LastIndex(ref, "/")+1:]), "dind")
}

// value is the node under n at the path of field names and list indexes
// ("spec", "containers", "0"), aliases followed; nil when it is not all there.
func value(n *yaml.Node, path ...string) *yaml.Node {
	for _, step := range path {
		if n == nil {
			return nil
		}
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == step {
					next = n.Content[i+1]
				}
			}
		case yaml.SequenceNode:
			var i int
			if _, err := fmt.Sscan(step, &i); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		}
		n = next
	}
	if n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// Warnings returns what a pools file sets that the sweeper accepts but that
// likely breaks its pools' jobs, ordered by position: each key of a pool's
// hookTemplate that replaces what actions/runner-container-hooks need in the
// workflow pods (hookTemplateWarnings). A warning does not make the file
// invalid. Pools whose fields fail Check are left to Check.
func Warnings(raw []byte) []*pool.Problem {
	cfg, root, problems := pool.ParseAll(raw)
	if cfg == nil {
		return nil
	}
	var out []*pool.Problem
	for i := range cfg.Pools {
		prefix := fmt.Sprintf("pools[%d]", i)
		if containerFieldsFailed(problems, prefix) {
			continue
		}
		at, _ := pool.Locate(root, prefix)
		out = append(out, hookTemplateWarnings(&cfg.Pools[i], at, prefix)...)
	}
	sortByPosition(out)
	return out
}

// containerFieldsFailed: the pool's kubernetes block or its container mode
// fields did not decode or failed their checks.
func containerFieldsFailed(problems []*pool.Problem, prefix string) bool {
	for _, p := range problems {
		rel, ok := strings.CutPrefix(p.Path(), prefix+".")
		if ok && (rel == "kubernetes" || strings.HasPrefix(rel, "kubernetes.containerMode") || strings.HasPrefix(rel, "kubernetes.hookTemplate")) {
			return true
		}
	}
	return false
}

// A hook template's spec keys replace the hooks' own values wholesale, and its
// `$job` container's fields other than env, volumeMounts and ports replace the
// job container's (the hooks' mergePodSpecWithOptions and
// mergeContainerWithOptions, runner-container-hooks v0.7.0 and v0.8.1
// packages/k8s/src/k8s/utils.ts); its labels overwrite theirs.
var hookTemplateKeys = []struct {
	path []string
	// mode limits the warning to one container mode ("": both).
	mode string
	// harmless reports a value that keeps what the hooks need.
	harmless func(v *yaml.Node) bool
	why      string
}{
	{path: []string{"metadata", "labels", "runner-pod"},
		why: "replaces the hooks' runner-pod label, by which the hooks' cleanup and runnerscaler's find a runner's workflow pods: they would be left running"},
	{path: []string{"spec", "initContainers"}, mode: pool.ContainerModeNoVolume,
		why: "replaces the hooks' init containers, removing fs-init, which prepares the workflow pod's volumes and copies the runner's externals (node) into them"},
	{path: []string{"spec", "securityContext"}, mode: pool.ContainerModeNoVolume,
		harmless: func(v *yaml.Node) bool {
			fs := value(v, "fsGroup")
			return fs != nil && fs.Value == "1001"
		},
		why: "replaces the hooks' pod securityContext, dropping its fsGroup 1001, by which the job's user writes the copied workspace; keep fsGroup: 1001 in it"},
	{path: []string{"spec", "imagePullSecrets"},
		why: "replaces the hooks' imagePullSecrets, dropping the registry secret they create from the job container's credentials: a private job image no longer pulls"},
	{path: []string{"spec", "nodeName"}, mode: pool.ContainerModeKubernetes,
		why: "replaces the hooks' pinning of the workflow pod to the runner's node, which the runner's ReadWriteOnce work volume needs: the pod cannot mount it elsewhere"},
	{path: []string{"spec", "affinity"}, mode: pool.ContainerModeKubernetes,
		why: "replaces the hooks' pinning of the workflow pod to the runner's node, which the runner's ReadWriteOnce work volume needs: the pod cannot mount it elsewhere"},
	{path: []string{"spec", "restartPolicy"},
		why: "replaces the hooks' Never: a restarted job container loses what the steps left in it, and the pod template of a container step's Job refuses Always"},
	{path: []string{"spec", "serviceAccountName"},
		why: "gives the workflow pod that service account's token, readable by every job step"},
	{path: []string{"spec", "automountServiceAccountToken"},
		harmless: func(v *yaml.Node) bool { return v.Value == "false" },
		why:      "gives the workflow pod its service account's token, readable by every job step"},
}

// hookTemplateWarnings: each key of the pool's hookTemplate that replaces what
// the hooks need (hookTemplateKeys), and a `$job` command or args, at its place.
func hookTemplateWarnings(p *pool.Pool, at *yaml.Node, prefix string) []*pool.Problem {
	k := p.Kubernetes
	tmpl := value(at, "kubernetes", "hookTemplate")
	if !k.InContainerMode() || tmpl == nil {
		return nil
	}
	where := fmt.Sprintf("%s (%s)", prefix, p.Name)
	warn := func(path, why string) *pool.Problem {
		field := "kubernetes.hookTemplate." + path
		n, _ := pool.Locate(at, field)
		return pool.NewProblem(n, where, prefix+"."+field, field+": "+why)
	}
	var out []*pool.Problem
	for _, key := range hookTemplateKeys {
		v := value(tmpl, key.path...)
		if v == nil || key.mode != "" && key.mode != k.ContainerMode || key.harmless != nil && key.harmless(v) {
			continue
		}
		out = append(out, warn(strings.Join(key.path, "."), key.why))
	}
	if containers := value(tmpl, "spec", "containers"); containers != nil && containers.Kind == yaml.SequenceNode {
		for i, c := range containers.Content {
			if name := value(c, "name"); name == nil || name.Value != "$job" {
				continue
			}
			for _, f := range []string{"command", "args"} {
				if value(c, f) != nil {
					out = append(out, warn(fmt.Sprintf("spec.containers[%d].%s", i, f),
						"replaces the job container's, whose `tail -f /dev/null` keeps the workflow pod running while the hooks exec each step in it"))
				}
			}
		}
	}
	return out
}
