package testenv

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ServiceAccountWithRole creates service account sa in ns, bound to a Role of
// rules there (both named after it), as a container-mode runner's service
// account is; the objects go with the namespace.
func ServiceAccountWithRole(t testing.TB, cs kubernetes.Interface, ns, sa string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: creating service account %s/%s: %v", ns, sa, err)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: creating role %s/%s: %v", ns, sa, err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: creating role binding %s/%s: %v", ns, sa, err)
	}
}

// ServiceAccountRESTConfig is a configuration that authenticates with a token
// of service account sa in ns (a TokenRequest, as the kubelet mounts into its
// pods): the identity a pod of that account has in the cluster.
func ServiceAccountRESTConfig(t testing.TB, ns, sa string) *rest.Config {
	t.Helper()
	admin := RESTConfig(t)
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: a token for %s/%s: %v", ns, sa, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tok.Status.Token
	return cfg
}
