// Package kube builds the sweeper's Kubernetes client: from a kubeconfig on the
// local stack (the EKS path — cluster endpoint, CA and an aws-iam-authenticator
// token — comes with the AWS wiring).
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
