package poolcheck

import (
	"fmt"
	"strings"

	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// EnforceLabel is the namespace label whose level Pod Security admission
// enforces on every pod created in it.
const EnforceLabel = api.EnforceLevelLabel

// PodSecurity checks the pod each pool's runners would run (runnerpod.FinalPod:
// the docker sidecar and every volume included) against the Pod Security level
// its namespace enforces, levels[namespace] ("privileged", "baseline" or
// "restricted", at the latest version; a namespace missing from levels is not
// checked), and reports each pool the admission would refuse, at its
// kubernetes.namespace, with the reasons. Pools whose fields fail Check are
// left to Check.
func PodSecurity(raw []byte, levels map[string]string) []*pool.Problem {
	cfg, root, problems := pool.ParseAll(raw)
	if cfg == nil {
		return nil
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return []*pool.Problem{{Message: "pod security checks: " + err.Error()}}
	}
	var out []*pool.Problem
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		prefix := fmt.Sprintf("pools[%d]", i)
		level, ok := levels[p.Kubernetes.Namespace]
		if !ok || podFieldsFailed(problems, prefix) {
			continue
		}
		lvl, err := api.ParseLevel(level)
		if err != nil {
			continue // the API server ignores a level it does not know, as this does
		}
		pod, err := runnerpod.FinalPod(p)
		if err != nil {
			continue // Check reports it
		}
		result := policy.AggregateCheckResults(evaluator.EvaluatePod(
			api.LevelVersion{Level: lvl, Version: api.LatestVersion()}, &pod.ObjectMeta, &pod.Spec))
		if result.Allowed {
			continue
		}
		var why []string
		for j, r := range result.ForbiddenReasons {
			if d := result.ForbiddenDetails[j]; d != "" {
				r += " (" + d + ")"
			}
			why = append(why, r)
		}
		at, _ := pool.Locate(root, prefix)
		n, _ := pool.Locate(at, "kubernetes.namespace")
		msg := fmt.Sprintf("kubernetes.namespace: %q enforces Pod Security %q, which refuses the runner pods: %s",
			p.Kubernetes.Namespace, level, strings.Join(why, "; "))
		if p.Kubernetes.DockerEnabled || p.Kubernetes.DockerdWithinRunnerContainer {
			msg += "; docker runs a privileged container: use a namespace that enforces \"privileged\" (infra/rbac-docker.yaml)"
		}
		out = append(out, pool.NewProblem(n, fmt.Sprintf("%s (%s)", prefix, p.Name), prefix+".kubernetes.namespace", msg))
	}
	return out
}
