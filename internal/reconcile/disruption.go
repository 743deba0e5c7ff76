package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// A busy runner's pod refuses voluntary disruption; an idle runner's pod blocks
// nothing.
//
//   - Each pool has one PodDisruptionBudget of ours (BudgetName) selecting the
//     pool's runner pods (runnerpod.LabelPool and runnerpod.LabelRunner: pods
//     without a runner label, such as placeholders, are not selected), with
//     maxUnavailable 0 and unhealthyPodEvictionPolicy AlwaysAllow. A runner
//     pod is Ready exactly while its runner runs a job (its readiness probe,
//     runnerpod.JobProbe): the disruption controller then never allows a
//     disruption, so the eviction API refuses a busy runner's pod (429), while
//     a pod that is not Ready — an idle runner's — is evicted at once under
//     AlwaysAllow. A drain (kubectl drain, Karpenter, the cluster-autoscaler)
//     therefore waits for the jobs and takes idle runners as it comes.
//   - While the pod's own report says its runner runs a job (reportsJob), the
//     pod carries runnerpod.AnnotationDoNotDisrupt "true" and
//     runnerpod.AnnotationSafeToEvict "false", so Karpenter and the
//     cluster-autoscaler do not pick its node to empty; they are removed once
//     the runner is idle. The annotations follow the sweeps; the budget follows
//     the probe.
//
// The budget is ensured once per Reconciler and budgetRecheck (its memory: no
// read per sweep), and deleted when a draining pool (removed from the pools
// file, or in a teardown) has no runner left. A pool removed from the file
// while it had no runner object is never swept (removed pools are found by
// their runners): its budget is deleted by the sweep of any pool of its
// namespace (dropRemovedBudgets). A budget of that name that does not record
// this deployment is never changed or deleted: ErrBudgetNotOurs.

// budgetSuffix names a pool's budget: <pool>-busy-runners, at most 53
// characters for a pool name of pool.MaxNameLength.
const budgetSuffix = "-busy-runners"

// ErrBudgetNotOurs is returned (wrapped, naming the budget) when a pool's
// PodDisruptionBudget name is taken by one that does not record this
// deployment: it is left as it is, and the pool's busy runners are protected
// only by the annotations (and by whatever that budget does).
var ErrBudgetNotOurs = errors.New("a PodDisruptionBudget of that name exists and is not this deployment's")

// budgetState is what this Reconciler last made sure of a pool's budget: its
// spec (as JSON) present, or absent (spec ""), at a time.
type budgetState struct {
	spec string
	at   time.Time
}

// BudgetName is the name of pool p's PodDisruptionBudget, in p's namespace.
func BudgetName(p *pool.Pool) string { return p.Name + budgetSuffix }

// WorkflowBudgetName is the name of container-mode pool p's budget of workflow
// pods, in its hook namespace.
func WorkflowBudgetName(p *pool.Pool) string { return p.Name + "-workflow-pods" }

// workflowBudget is the budget of container-mode pool p's workflow pods: every
// pod labelled runnerpod.LabelWorkflowPool with p's name (the hook template's
// label), which exists only while its job runs. Workflow pods have no
// controller, which a budget in maxUnavailable needs, so it asks for more
// available pods than can exist (minAvailable MaxInt32): the disruption
// controller then never allows a disruption, and the eviction API refuses a
// running workflow pod, while one not Ready (pending, failed) is evicted at once
// under AlwaysAllow. The pool's label keeps it apart from the runner budgets
// that dropRemovedBudgets looks at.
func (r *Reconciler) workflowBudget(p *pool.Pool) *policyv1.PodDisruptionBudget {
	annotations := map[string]string{}
	if r.opts.Deployment != "" {
		annotations[runnerpod.AnnotationDeployment] = r.opts.Deployment
	}
	all := intstr.FromInt32(math.MaxInt32)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: WorkflowBudgetName(p), Namespace: p.Kubernetes.HookNamespace(),
			Labels: map[string]string{runnerpod.LabelWorkflowPool: p.Name}, Annotations: annotations},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{runnerpod.LabelWorkflowPool: p.Name}},
			MinAvailable:               &all,
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}

// budget is the PodDisruptionBudget of pool p, as this deployment wants it.
func (r *Reconciler) budget(p *pool.Pool) *policyv1.PodDisruptionBudget {
	annotations := map[string]string{}
	if r.opts.Deployment != "" {
		annotations[runnerpod.AnnotationDeployment] = r.opts.Deployment
	}
	zero := intstr.FromInt32(0)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: BudgetName(p), Namespace: p.Kubernetes.Namespace,
			Labels: map[string]string{runnerpod.LabelPool: p.Name}, Annotations: annotations},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{runnerpod.LabelPool: p.Name},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: runnerpod.LabelRunner, Operator: metav1.LabelSelectorOpExists}},
			},
			MaxUnavailable:             &zero,
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}

// guardBudget keeps the pool's budget: deleted once a draining pool has no
// runner left that a budget protects (a live StatefulSet, finishing or not,
// or an orphaned pod not being deleted), ensured otherwise.
func (r *Reconciler) guardBudget(ctx context.Context, s *sweep) error {
	wants := []*policyv1.PodDisruptionBudget{r.budget(s.p)}
	if s.p.Kubernetes.InContainerMode() {
		wants = append(wants, r.workflowBudget(s.p))
	}
	var errs []error
	for _, want := range wants {
		if s.p.IsDraining() && live(s.runners) == 0 && !slices.ContainsFunc(s.orphans, func(rn *runner) bool { return notDeleting(rn.pod) }) {
			errs = append(errs, r.dropBudget(ctx, s, want.Namespace, want.Name))
		} else {
			errs = append(errs, r.ensureBudget(ctx, s, want))
		}
	}
	return errors.Join(append(errs, r.dropRemovedBudgets(ctx, s))...)
}

// dropRemovedBudgets deletes, in the pool's namespace, this deployment's
// budgets of pools the pools file no longer has and that have no runner left
// there: no StatefulSet of the pool, no pod of it that is not being deleted.
// A removed pool with runners keeps its budget: it is drained as a removed
// pool, whose sweep deletes the budget once the last runner is gone
// (guardBudget). It lists the namespace's budgets once per CleanupInterval
// (on the first sweep of this Reconciler in it), and the pool's runner
// objects only for a budget that is a leftover's.
func (r *Reconciler) dropRemovedBudgets(ctx context.Context, s *sweep) error {
	ns := s.p.Kubernetes.Namespace
	if last, ok := r.removedBudgetsChecked.Load(ns); ok && s.now.Sub(last.(time.Time)) < r.opts.CleanupInterval {
		return nil
	}
	api := r.kube.PolicyV1().PodDisruptionBudgets(ns)
	list, err := api.List(ctx, metav1.ListOptions{LabelSelector: runnerpod.LabelPool})
	if err != nil {
		return fmt.Errorf("listing poddisruptionbudgets in %s: %w", ns, err)
	}
	var errs []error
	for i := range list.Items {
		pdb := &list.Items[i]
		owner := pdb.Labels[runnerpod.LabelPool]
		if _, configured := r.templates[owner]; configured || owner == s.p.Name || !r.ours(pdb.ObjectMeta) ||
			pdb.Name != owner+budgetSuffix || pdb.DeletionTimestamp != nil {
			continue
		}
		if err := r.dropLeftoverBudget(ctx, s, pdb); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.removedBudgetsChecked.Store(ns, s.now)
	return nil
}

// dropLeftoverBudget deletes pdb, the budget of a pool removed from the file,
// if that pool has no runner left in its namespace (UID precondition).
func (r *Reconciler) dropLeftoverBudget(ctx context.Context, s *sweep, pdb *policyv1.PodDisruptionBudget) error {
	removed := pdb.Labels[runnerpod.LabelPool]
	sel := metav1.ListOptions{LabelSelector: runnerpod.LabelPool + "=" + removed}
	stss, err := r.kube.AppsV1().StatefulSets(pdb.Namespace).List(ctx, sel)
	if err != nil {
		return fmt.Errorf("listing the runners of removed pool %s: %w", removed, err)
	}
	pods, err := r.kube.CoreV1().Pods(pdb.Namespace).List(ctx, sel)
	if err != nil {
		return fmt.Errorf("listing the runner pods of removed pool %s: %w", removed, err)
	}
	if len(stss.Items) > 0 || slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp == nil }) {
		return nil // drained as a removed pool, whose last sweep deletes the budget
	}
	err = r.kube.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Delete(ctx, pdb.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pdb.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting poddisruptionbudget %s/%s of removed pool %s: %w", pdb.Namespace, pdb.Name, removed, err)
	}
	s.log.Info("poddisruptionbudget of a pool removed from the pools file deleted: it has no runner left", "budget", pdb.Name, "removedPool", removed)
	return nil
}

func notDeleting(pod *corev1.Pod) bool { return pod.DeletionTimestamp == nil }

// budgetRecheck: a budget this Reconciler ensured is looked at again after this
// long (someone may have changed or deleted it): Options.CleanupInterval.
func (r *Reconciler) budgetRecheck() time.Duration { return r.opts.CleanupInterval }

// remembered: this Reconciler made sure, within budgetRecheck, that the
// budget's spec is spec ("" absent).
func (r *Reconciler) remembered(s *sweep, key, spec string) bool {
	v, ok := r.budgets.Load(key)
	if !ok {
		return false
	}
	st := v.(budgetState)
	return st.spec == spec && s.now.Sub(st.at) < r.budgetRecheck()
}

// ensureBudget creates the pool's budget, or — when one of its name exists —
// makes it ours as wanted: the same spec, labels and annotations (an update
// fenced by the resourceVersion read), unless it is not this deployment's.
func (r *Reconciler) ensureBudget(ctx context.Context, s *sweep, want *policyv1.PodDisruptionBudget) error {
	raw, err := json.Marshal(want)
	if err != nil {
		return err
	}
	key, spec := want.Namespace+"/"+want.Name, string(raw)
	if r.remembered(s, key, spec) {
		return nil
	}
	api := r.kube.PolicyV1().PodDisruptionBudgets(want.Namespace)
	_, err = api.Create(ctx, want, metav1.CreateOptions{})
	switch {
	case err == nil:
		s.log.Info("busy runners (or their workflow pods) protected from eviction: poddisruptionbudget created", "budget", want.Name)
	case apierrors.IsAlreadyExists(err):
		if err := r.adoptBudget(ctx, s, want); err != nil {
			return err
		}
	default:
		return fmt.Errorf("creating poddisruptionbudget %s/%s: %w", want.Namespace, want.Name, err)
	}
	r.budgets.Store(key, budgetState{spec: spec, at: s.now})
	return nil
}

// adoptBudget reads the existing budget of want's name and updates it to want
// when it is ours and differs. The update is fenced by the resourceVersion
// read; a conflict (the disruption controller writes the budget's status
// whenever a runner becomes busy or idle) reads it again and decides again.
func (r *Reconciler) adoptBudget(ctx context.Context, s *sweep, want *policyv1.PodDisruptionBudget) error {
	api := r.kube.PolicyV1().PodDisruptionBudgets(want.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading poddisruptionbudget %s/%s: %w", want.Namespace, want.Name, err)
		}
		if !r.ours(cur.ObjectMeta) {
			return fmt.Errorf("pool %s: poddisruptionbudget %s/%s (deployment %q, want %q): %w; rename or delete it so the sweeper can make its own",
				s.p.Name, cur.Namespace, cur.Name, cur.Annotations[runnerpod.AnnotationDeployment], r.opts.Deployment, ErrBudgetNotOurs)
		}
		if sameBudget(cur, want) {
			return nil
		}
		cur.Spec = want.Spec
		cur.Labels = withKeys(cur.Labels, want.Labels)
		cur.Annotations = withKeys(cur.Annotations, want.Annotations)
		if _, err := api.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating poddisruptionbudget %s/%s: %w", want.Namespace, want.Name, err)
		}
		s.log.Warn("poddisruptionbudget of busy runners restored: it differed from the sweeper's", "budget", want.Name)
		return nil
	})
}

// sameBudget: cur has want's spec, labels and annotations (others may be added).
func sameBudget(cur, want *policyv1.PodDisruptionBudget) bool {
	if !apiequality.Semantic.DeepEqual(cur.Spec, want.Spec) {
		return false
	}
	for _, m := range []struct{ cur, want map[string]string }{{cur.Labels, want.Labels}, {cur.Annotations, want.Annotations}} {
		for k, v := range m.want {
			if m.cur[k] != v {
				return false
			}
		}
	}
	return true
}

// withKeys returns m with keys' entries set.
func withKeys(m, keys map[string]string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	maps.Copy(m, keys)
	return m
}

// dropBudget deletes the pool's budget ns/name if it is ours (UID
// precondition); a budget of another owner is left, and logged.
func (r *Reconciler) dropBudget(ctx context.Context, s *sweep, ns, name string) error {
	key := ns + "/" + name
	if r.remembered(s, key, "") {
		return nil
	}
	api := r.kube.PolicyV1().PodDisruptionBudgets(ns)
	cur, err := api.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading poddisruptionbudget %s/%s: %w", ns, name, err)
	case !r.ours(cur.ObjectMeta):
		s.log.Warn("poddisruptionbudget of this pool's name is not this deployment's: left as it is",
			"budget", name, "deployment", cur.Annotations[runnerpod.AnnotationDeployment])
	default:
		err := api.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting poddisruptionbudget %s/%s: %w", ns, name, err)
		}
		s.log.Info("poddisruptionbudget of busy runners deleted: the draining pool has no runner left", "budget", name)
	}
	r.budgets.Store(key, budgetState{at: s.now})
	return nil
}

// markBusy keeps the disruption annotations on the pods of runners that run a
// job by their pod's report, and off the others: one fenced patch per change.
// Pods being deleted are left as they are.
func (r *Reconciler) markBusy(ctx context.Context, s *sweep) error {
	var errs []error
	for _, rn := range s.runners {
		if rn.stale || rn.pod == nil || rn.pod.DeletionTimestamp != nil {
			continue
		}
		patch := disruptionPatch(rn.pod.Annotations, reportsJob(rn.pod))
		if patch == nil {
			continue
		}
		if err := r.patchPod(ctx, rn, patch); err != nil {
			errs = append(errs, fmt.Errorf("disruption annotations of pod %s: %w", rn.pod.Name, err))
		}
	}
	return errors.Join(errs...)
}

// disruptionPatch is the annotations patch that makes a pod's disruption
// annotations match busy; nil when they already do.
func disruptionPatch(have map[string]string, busy bool) map[string]any {
	want := map[string]string{runnerpod.AnnotationDoNotDisrupt: "true", runnerpod.AnnotationSafeToEvict: "false"}
	patch := map[string]any{}
	for k, v := range want {
		cur, ok := have[k]
		switch {
		case busy && cur != v:
			patch[k] = v
		case !busy && ok:
			patch[k] = nil
		}
	}
	if len(patch) == 0 {
		return nil
	}
	return patch
}
