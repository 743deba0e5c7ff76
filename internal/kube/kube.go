// Package kube builds Kubernetes clients: the sweeper's, from a kubeconfig on the
// local stack or for EKS (cluster endpoint, CA and an aws-iam-authenticator
// token), and the operator's, from their own kubeconfig.
package kube

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// FromKubeconfig loads the current context of the kubeconfig at path.
func FromKubeconfig(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// FromOperatorKubeconfig loads the operator's kubeconfig the way kubectl does:
// path when set, else KUBECONFIG, else ~/.kube/config; in context, when set,
// else the current one.
func FromOperatorKubeconfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

// NewClient returns a clientset. A sweep of many pools issues bursts of small
// requests, so client-side throttling is raised well above client-go's 5 QPS.
func NewClient(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	return cs, nil
}
