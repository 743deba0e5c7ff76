// Package dryrun asks a Kubernetes API server whether it admits the runners of
// a pools file: each pool's template is validated as the sweeper validates it
// at start (runnerpod.Validate), and one runner StatefulSet per pool is created
// in a server-side dry run (admission, validation and quota; nothing stored),
// as the sweeper does before the first creation of each template.
package dryrun

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// Deployment is the deployment name the dry-run StatefulSets record.
const Deployment = "runnerscaler-import-arc"

// Check validates every pool of cfg and dry-runs one runner StatefulSet of each
// in its namespace; now stamps the objects as the sweeper's clock would. The
// error names each pool the server refused and why; the caller's credentials
// need create on statefulsets in the pools' namespaces.
func Check(ctx context.Context, kube kubernetes.Interface, cfg *pool.Config, now time.Time) error {
	if err := runnerpod.Validate(cfg); err != nil {
		return err
	}
	var errs []error
	for i := range cfg.Pools {
		if err := admit(ctx, kube, &cfg.Pools[i], now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func admit(ctx context.Context, kube kubernetes.Interface, p *pool.Pool, now time.Time) error {
	tmpl, err := runnerpod.Template(p)
	if err != nil {
		return err
	}
	spec := runnerpod.Spec{Pool: p, Template: tmpl, Hash: runnerpod.Hash(p, tmpl), Name: runnerpod.NewName(p.Name),
		GitHubURL: "https://github.com", Deployment: Deployment, Now: now, Creds: runnerpod.Credentials{Token: "dry-run"}}
	if p.IsEphemeral() {
		spec.Creds = runnerpod.Credentials{JITConfig: "dry-run"}
	}
	_, err = kube.AppsV1().StatefulSets(p.Kubernetes.Namespace).Create(ctx, runnerpod.StatefulSet(spec),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return fmt.Errorf("pool %s: the API server does not admit its StatefulSet (dry run in namespace %s): %w", p.Name, p.Kubernetes.Namespace, err)
	}
	return nil
}
