package reconcile

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// ours reports whether a runner object records this deployment as its maker
// (runnerpod.AnnotationDeployment equal to Options.Deployment). Only such objects
// are observed, stopped, cleaned up or deleted, and only their records (runner
// ids) reach GitHub: anyone who can write a Secret, a StatefulSet or a pod in a
// runner namespace can put the pool label on it, but what it makes the sweeper
// do is then limited to what it can claim as this deployment's. A reconciler
// without a deployment name (tests) takes the objects that record none as its
// own: the sweeper's always has one (the table name), so an object that records
// no deployment is never its.
func (r *Reconciler) ours(meta metav1.ObjectMeta) bool {
	return meta.Annotations[runnerpod.AnnotationDeployment] == r.opts.Deployment
}
