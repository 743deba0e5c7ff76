package main

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/runnerscaler/runnerscaler/internal/hookrbac"
	"github.com/runnerscaler/runnerscaler/internal/pool"
)

const hookRBACHelp = `usage: runnerscaler hook-rbac [FILE]

Prints, as YAML to apply with 'kubectl apply -f -', the Kubernetes objects the
pools file's container-mode pools (kubernetes.containerMode) need: each pool's
runner service account (kubernetes.serviceAccountName), a Role with exactly
the container hooks' verbs in the pool's hook namespace (the runners' namespace
in kubernetes mode, kubernetes.jobsNamespace in kubernetes-novolume mode) and
its RoleBinding, and in kubernetes-novolume mode the sweeper's Role in the jobs
namespace. FILE defaults to RUNNERSCALER_POOLS, then pools.yaml. The pools
file must be valid ('runnerscaler validate'). Namespaces are not created.`

// parseHookRBAC parses hook-rbac's command line: the pools file.
func parseHookRBAC(args []string, getenv func(string) string) (string, error) {
	fs := newFlagSet("hook-rbac", hookRBACHelp)
	positional, err := fs.Parse(args)
	switch {
	case err != nil:
		return "", err
	case len(positional) > 1:
		return "", usagef("one FILE at most, got %q", positional)
	}
	file := ""
	if len(positional) == 1 {
		file = positional[0]
	}
	return poolsFile(file, getenv, "FILE")
}

// hookRBAC is `runnerscaler hook-rbac`.
func hookRBAC(args []string, e env) error {
	file, err := parseHookRBAC(args, e.getenv)
	if err != nil {
		return err
	}
	cfg, err := pool.Load(file)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	for i := range cfg.Pools {
		for _, obj := range hookrbac.Objects(&cfg.Pools[i]) {
			raw, err := yaml.Marshal(obj)
			if err != nil {
				return fmt.Errorf("pool %s: %w", cfg.Pools[i].Name, err)
			}
			out.WriteString("---\n")
			out.Write(bytes.ReplaceAll(raw, []byte("  creationTimestamp: null\n"), nil))
		}
	}
	if out.Len() == 0 {
		return fmt.Errorf("%s: no pool sets kubernetes.containerMode: nothing to print", file)
	}
	_, err = e.stdout.Write(out.Bytes())
	return err
}
