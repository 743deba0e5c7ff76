package poolcheck

import (
	"fmt"
	"maps"
	"slices"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// Cluster is what the container mode checks read of a cluster
// (`runnerscaler validate --kubeconfig`).
type Cluster struct {
	// StorageClasses maps the name of each StorageClass to whether it is the
	// cluster's default (the storageclass.kubernetes.io/is-default-class annotation).
	StorageClasses map[string]bool
	// Namespaces holds each namespace that exists, of those asked about
	// (ClusterNamespaces).
	Namespaces map[string]bool
}

// NeedsStorageClasses reports whether a pool of cfg is in kubernetes mode, whose
// work volume claim ClusterProblems checks against the StorageClasses.
func NeedsStorageClasses(cfg *pool.Config) bool {
	for _, p := range cfg.Pools {
		if p.Kubernetes.ContainerMode == pool.ContainerModeKubernetes {
			return true
		}
	}
	return false
}

// JobsNamespaces are the jobs namespaces of cfg's kubernetes-novolume pools,
// whose existence ClusterProblems checks.
func JobsNamespaces(cfg *pool.Config) []string {
	var out []string
	for _, p := range cfg.Pools {
		if p.Kubernetes.ContainerMode == pool.ContainerModeNoVolume {
			out = append(out, p.Kubernetes.JobsNamespace)
		}
	}
	return out
}

// ClusterProblems checks each container mode pool of the pools file raw
// against the cluster c: a kubernetes pool's work volume claim names a
// StorageClass the cluster has, or, without one, the cluster has a default
// StorageClass (otherwise each runner's claim stays Pending, and so does its
// pod); a kubernetes-novolume pool's jobs namespace exists (the hooks would
// fail every container job). Pools whose fields fail Check are left to Check.
func ClusterProblems(raw []byte, c Cluster) []*pool.Problem {
	cfg, root, problems := pool.ParseAll(raw)
	if cfg == nil {
		return nil
	}
	var out []*pool.Problem
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		prefix := fmt.Sprintf("pools[%d]", i)
		if containerFieldsFailed(problems, prefix) || podFieldsFailed(problems, prefix) {
			continue
		}
		at, _ := pool.Locate(root, prefix)
		where := fmt.Sprintf("%s (%s)", prefix, p.Name)
		problem := func(field, format string, args ...any) {
			n, _ := pool.Locate(at, field)
			out = append(out, pool.NewProblem(n, where, prefix+"."+field, field+": "+fmt.Sprintf(format, args...)))
		}
		switch p.Kubernetes.ContainerMode {
		case pool.ContainerModeKubernetes:
			class := value(at, "kubernetes", "workVolumeClaim", "storageClassName")
			switch {
			case class == nil && !hasDefault(c.StorageClasses):
				problem("kubernetes.workVolumeClaim", "names no storageClassName and the cluster has no default StorageClass: "+
					"each runner's work volume claim would stay Pending, and its pod with it; name one of %v", sortedKeys(c.StorageClasses))
			case class != nil && class.Value == "":
				problem("kubernetes.workVolumeClaim.storageClassName", `"" asks for a volume made beforehand, with no class: `+
					"each runner's claim needs a volume of its own; name one of %v", sortedKeys(c.StorageClasses))
			case class != nil && !hasKey(c.StorageClasses, class.Value):
				problem("kubernetes.workVolumeClaim.storageClassName", "%q is not a StorageClass of the cluster (it has %v): "+
					"each runner's work volume claim would stay Pending, and its pod with it", class.Value, sortedKeys(c.StorageClasses))
			}
		case pool.ContainerModeNoVolume:
			if ns := p.Kubernetes.JobsNamespace; !c.Namespaces[ns] {
				problem("kubernetes.jobsNamespace", "namespace %q does not exist on the cluster: the hooks could create no workflow pod; "+
					"create it with the hooks' Role (runnerscaler hook-rbac)", ns)
			}
		}
	}
	sortByPosition(out)
	return out
}

func hasDefault(classes map[string]bool) bool {
	for _, isDefault := range classes {
		if isDefault {
			return true
		}
	}
	return false
}

func hasKey(m map[string]bool, k string) bool {
	_, ok := m[k]
	return ok
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }
