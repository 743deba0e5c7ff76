package tests

import (
	"context"
	"fmt"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/internal/hookrbac"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// applyHookRBAC creates hookrbac's objects for p on the stack's API server.
func applyHookRBAC(t testing.TB, cs kubernetes.Interface, p *pool.Pool) {
	t.Helper()
	ctx := t.Context()
	for _, obj := range hookrbac.Objects(p) {
		var err error
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("unexpected object %T", obj)
		}
		if err != nil {
			t.Fatalf("applying %T: %v", obj, err)
		}
	}
}

// serviceAccountClient authenticates with a token of the service account
// (TokenRequest), as the hooks in the runner pod do.
func serviceAccountClient(t *testing.T, cs kubernetes.Interface, ns, name string) kubernetes.Interface {
	t.Helper()
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s: %v", ns, name, err)
	}
	admin := testenv.RESTConfig(t)
	cfg := &rest.Config{Host: admin.Host, BearerToken: tok.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData, CAFile: admin.CAFile}}
	sa, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sa
}

// canI asks the API server, as the client, whether it may verb resource
// (group/resource/subresource) in ns.
func canI(t *testing.T, cs kubernetes.Interface, verb, group, resource, sub, ns string) bool {
	t.Helper()
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authzv1.SelfSubjectAccessReview{
		Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: group, Resource: resource, Subresource: sub}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("can-i %s %s/%s: %v", verb, resource, sub, err)
	}
	return r.Status.Allowed
}

type access struct {
	verb, group, resource, sub string
}

// gate is the hooks' permission gate (hooks 0.7.0 and 0.8.1
// packages/k8s/src/k8s/index.ts requiredPermissions), every verb of which
// must be allowed in the hook namespace or the hook exits.
func gate(mode string) []access {
	out := []access{
		{"get", "", "pods", ""}, {"list", "", "pods", ""}, {"create", "", "pods", ""}, {"delete", "", "pods", ""},
		{"get", "", "pods", "exec"}, {"create", "", "pods", "exec"},
		{"get", "", "pods", "log"}, {"list", "", "pods", "log"}, {"watch", "", "pods", "log"},
		{"get", "", "secrets", ""}, {"list", "", "secrets", ""}, {"create", "", "secrets", ""}, {"delete", "", "secrets", ""},
	}
	if mode == pool.ContainerModeKubernetes {
		out = append(out, access{"get", "batch", "jobs", ""}, access{"list", "batch", "jobs", ""},
			access{"create", "batch", "jobs", ""}, access{"delete", "batch", "jobs", ""})
	}
	return out
}

// beyondGate is what the runners' service account must not do anywhere.
var beyondGate = []access{
	{"watch", "", "pods", ""}, {"patch", "", "pods", ""}, {"update", "", "pods", ""},
	{"create", "", "pods", "eviction"}, {"create", "", "serviceaccounts", "token"},
	{"get", "", "configmaps", ""}, {"list", "apps", "statefulsets", ""}, {"create", "", "persistentvolumeclaims", ""},
	{"update", "", "secrets", ""}, {"patch", "", "secrets", ""},
}

// TestHookServiceAccountHasTheGateAndNothingElse: the runners' service account
// that `runnerscaler hook-rbac` sets up may do every verb of the hooks' gate in
// the hook namespace and nothing else there; in a kubernetes-novolume pool,
// nothing at all in the runners' namespace, where a pod it creates is refused,
// while in the jobs namespace one is accepted.
func TestHookServiceAccountHasTheGateAndNothingElse(t *testing.T) {
	t.Parallel()
	for _, mode := range pool.ContainerModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cs, runners := testenv.Namespace(t)
			_, jobs := testenv.Namespace(t)
			p := &pool.Pool{Name: "cm", Kubernetes: pool.Kubernetes{Namespace: runners, ServiceAccountName: "cm-hooks", ContainerMode: mode}}
			if mode == pool.ContainerModeNoVolume {
				p.Kubernetes.JobsNamespace = jobs
			}
			applyHookRBAC(t, cs, p)
			sa := serviceAccountClient(t, cs, runners, "cm-hooks")
			hookNS := p.Kubernetes.HookNamespace()
			for _, a := range gate(mode) {
				if !canI(t, sa, a.verb, a.group, a.resource, a.sub, hookNS) {
					t.Errorf("%s %s/%s in the hook namespace: denied, but the hooks' gate needs it", a.verb, a.resource, a.sub)
				}
			}
			for _, a := range beyondGate {
				for _, ns := range []string{runners, jobs, ""} {
					if canI(t, sa, a.verb, a.group, a.resource, a.sub, ns) {
						t.Errorf("%s %s/%s in %q: allowed, beyond the hooks' gate", a.verb, a.resource, a.sub, ns)
					}
				}
			}
			if mode == pool.ContainerModeKubernetes {
				return
			}
			for _, a := range gate(pool.ContainerModeKubernetes) {
				if canI(t, sa, a.verb, a.group, a.resource, a.sub, runners) {
					t.Errorf("%s %s/%s in the runners' namespace: allowed to a novolume pool's runners", a.verb, a.resource, a.sub)
				}
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "forged"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
			if _, err := sa.CoreV1().Pods(runners).Create(t.Context(), pod, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("creating a pod in the runners' namespace: %v, want Forbidden", err)
			}
			if _, err := sa.CoreV1().Pods(jobs).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
				t.Errorf("creating a pod in the jobs namespace: %v", err)
			}
		})
	}
}

// TestHookRBACGivesTheSweeperTheJobsNamespace: in kubernetes-novolume mode the
// sweeper's group may list and delete the jobs namespace's pods and Secrets
// and keep its disruption budget there, and create nothing else.
func TestHookRBACGivesTheSweeperTheJobsNamespace(t *testing.T) {
	t.Parallel()
	cs, runners := testenv.Namespace(t)
	_, jobs := testenv.Namespace(t)
	p := &pool.Pool{Name: "cm", Kubernetes: pool.Kubernetes{Namespace: runners, JobsNamespace: jobs,
		ServiceAccountName: "cm-hooks", ContainerMode: pool.ContainerModeNoVolume}}
	applyHookRBAC(t, cs, p)
	sweeper, err := kubernetes.NewForConfig(testenv.UserRESTConfig(t, "sweeper", []string{hookrbac.SweeperGroup}))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []access{{"list", "", "pods", ""}, {"delete", "", "pods", ""}, {"list", "", "secrets", ""}, {"delete", "", "secrets", ""},
		{"create", "policy", "poddisruptionbudgets", ""}, {"update", "policy", "poddisruptionbudgets", ""}} {
		if !canI(t, sweeper, a.verb, a.group, a.resource, a.sub, jobs) {
			t.Errorf("sweeper: %s %s in the jobs namespace denied", a.verb, a.resource)
		}
	}
	for _, a := range []access{{"create", "", "pods", ""}, {"get", "", "secrets", ""}, {"create", "", "pods", "exec"}} {
		if canI(t, sweeper, a.verb, a.group, a.resource, a.sub, jobs) {
			t.Errorf("sweeper: %s %s/%s in the jobs namespace allowed", a.verb, a.resource, a.sub)
		}
	}
}
