package testenv

import (
	"context"
	"net/url"
	"os"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// InClusterAccess is what a pod needs on the local stack to reach the API
// server with its in-cluster configuration, as kube-proxy, the ServiceAccount
// admission plugin and the root-CA publisher give it in a cluster — the stack
// runs none of them:
//   - Host and Port: the API server's address, which the pod (host network)
//     reaches directly; KUBERNETES_SERVICE_HOST/PORT set to them in the pod's
//     container override the Service ClusterIP the kubelet puts there, which
//     nothing routes here (and which the API server's certificate does not name).
//   - the ConfigMap kube-root-ca.crt in the namespace, with the stack's CA, for
//     the projected service-account volume (Volume, VolumeMount).
type InClusterAccess struct {
	Host, Port string
}

// ServiceAccountDir is where a pod's in-cluster credentials are mounted.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// PrepareInClusterAccess publishes the stack's CA as kube-root-ca.crt in each
// namespace and returns the API server's address.
func PrepareInClusterAccess(t testing.TB, cs kubernetes.Interface, namespaces ...string) InClusterAccess {
	t.Helper()
	admin := RESTConfig(t)
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		raw, err := os.ReadFile(admin.CAFile)
		if err != nil {
			t.Fatalf("testenv: reading the stack's CA: %v", err)
		}
		ca = raw
	}
	for _, ns := range namespaces {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": string(ca)}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("testenv: publishing kube-root-ca.crt in %s: %v", ns, err)
		}
	}
	u, err := url.Parse(admin.Host)
	if err != nil {
		t.Fatalf("testenv: the API server's address %q: %v", admin.Host, err)
	}
	return InClusterAccess{Host: u.Hostname(), Port: u.Port()}
}

// Env is the container environment pointing the in-cluster configuration at the API server.
func (a InClusterAccess) Env() []corev1.EnvVar {
	return []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: a.Host}, {Name: "KUBERNETES_SERVICE_PORT", Value: a.Port}}
}

// Volume is the projected service-account volume the ServiceAccount admission
// plugin adds to a pod (kube-api-access-<random> there): a bound token, the
// CA, the namespace.
func (a InClusterAccess) Volume(name string) corev1.Volume {
	expiry := int64(3607)
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
			Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
	}}}}
}

// VolumeMount mounts Volume(name) where client libraries look for it.
func (a InClusterAccess) VolumeMount(name string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: ServiceAccountDir, ReadOnly: true}
}
