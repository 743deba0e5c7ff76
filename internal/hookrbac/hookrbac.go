// Package hookrbac says what Kubernetes rights a container-mode pool needs
// (kubernetes.containerMode), as objects to apply: the runners' service
// account, a Role with exactly the container hooks' gated verbs in the hook
// namespace and its binding, and, in kubernetes-novolume mode, the sweeper's
// Role in the jobs namespace.
//
// The hooks (actions/runner-container-hooks) exit before doing anything unless
// a SelfSubjectAccessReview allows every verb of their list, so the Role holds
// all of them, even those a hook release never calls: in kubernetes mode
// (hooks 0.7.0) pods get/list/create/delete, pods/exec get/create, pods/log
// get/list/watch, jobs (batch) get/list/create/delete and secrets
// get/list/create/delete; kubernetes-novolume (0.8.1) the same without jobs.
// Nothing else: no watch on pods, no cluster-wide right. A Role cannot be
// narrowed to some pods, so the runners' service account can exec into and
// delete any pod of the hook namespace: in kubernetes mode that is the
// runners' own namespace (the hooks read the runner's pod and mount its claim
// there), in kubernetes-novolume mode a namespace of the pool's jobs only.
package hookrbac

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// SweeperGroup is the Kubernetes group the sweeper's IAM role is mapped to
// (infra/rbac.yaml, the SAM stack's access entry).
const SweeperGroup = "runnerscaler-sweeper"

// HooksRules are the hooks' gated verbs in mode (pool.ContainerModes).
func HooksRules(mode string) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"get", "create"}},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "delete"}},
	}
	if mode == pool.ContainerModeKubernetes {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "create", "delete"}})
	}
	return rules
}

// SweeperRules are what the sweeper needs in a jobs namespace: to list and
// remove workflow pods and the Secrets the hooks made for them, and to keep
// the pool's workflow disruption budget.
func SweeperRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "delete"}},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"list", "get", "create", "update", "delete"}},
	}
}

// RoleName is the name of the hooks' Role and RoleBinding of pool p.
func RoleName(p *pool.Pool) string { return p.Name + "-hooks" }

// Objects are the objects a container-mode pool needs, in the order to apply
// them; none for a pool outside container mode.
func Objects(p *pool.Pool) []runtime.Object {
	k := p.Kubernetes
	if !k.InContainerMode() {
		return nil
	}
	labels := map[string]string{"app.kubernetes.io/managed-by": "runnerscaler", "runnerscaler.dev/pool": p.Name}
	meta := func(name, ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	hookNS := k.HookNamespace()
	objs := []runtime.Object{
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(k.ServiceAccountName, k.Namespace)},
		&rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(RoleName(p), hookNS), Rules: HooksRules(k.ContainerMode)},
		&rbacv1.RoleBinding{
			TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(RoleName(p), hookNS),
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: k.ServiceAccountName, Namespace: k.Namespace}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: RoleName(p)},
		},
	}
	if k.ContainerMode != pool.ContainerModeNoVolume {
		return objs // the sweeper's Role of the runners' namespace covers workflow pods there
	}
	sweeper := fmt.Sprintf("runnerscaler-sweeper-%s", p.Name)
	return append(objs,
		&rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(sweeper, hookNS), Rules: SweeperRules()},
		&rbacv1.RoleBinding{
			TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(sweeper, hookNS),
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: SweeperGroup}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sweeper},
		})
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}
