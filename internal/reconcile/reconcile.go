// Package reconcile keeps one pool's runners on Kubernetes in line with the
// desired count, with ARC v0.22's semantics (syncRunnerPodsOwners,
// tickRunnerGracefulStop, EffectiveTime), made stateless: every step is a small
// idempotent write whose progress lives in annotations, so a sweep killed at any
// instant resumes on the next one without creating twice, losing a mark, or
// deleting a busy runner.
//
// Per sweep, under the pool's lease:
//  1. observe: one list of StatefulSets and one of pods; classify each runner;
//  2. register: record the runner id of pods GitHub lists (actions-runner/id);
//  3. sync: mark completed, timed-out, outdated and surplus runners; create missing
//     ones, unless an ephemeral runner just finished and the webhook has not yet
//     caught up (the EffectiveTime hold);
//  4. stop: pods deleted by someone else, and runners marked for unregistration,
//     go through the graceful stop; an owner whose pod is unregistered is deleted;
//  5. clean up what a crash between creation steps left behind.
package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
)

// Options tune the reconciler; zero values take ARC's defaults.
type Options struct {
	// RegistrationTimeout: a pod Running and Ready this long without GitHub listing
	// its runner is replaced (default 10m).
	RegistrationTimeout time.Duration
	// RecreationDelay: ARC's DefaultRunnerPodRecreationDelayAfterWebhookScale (default 10m).
	RecreationDelay time.Duration
	// GitHubURL is where runners register (default https://github.com).
	GitHubURL string
	// Metrics receives one CloudWatch Embedded Metric Format line per pool sweep (nil: none).
	Metrics io.Writer
}

// Reconciler reconciles pools. It implements the sweeper's Reconciler.
type Reconciler struct {
	kube      kubernetes.Interface
	gh        GitHub
	clock     clock.PassiveClock
	log       *slog.Logger
	opts      Options
	templates map[string]built
}

type built struct {
	tmpl corev1.PodTemplateSpec
	hash string
}

// New returns a reconciler for the pools of cfg; it fails when a pool's pod
// template is invalid.
func New(cfg *pool.Config, kube kubernetes.Interface, gh GitHub, clk clock.PassiveClock, log *slog.Logger, opts Options) (*Reconciler, error) {
	if err := runnerpod.Validate(cfg); err != nil {
		return nil, err
	}
	if opts.RegistrationTimeout <= 0 {
		opts.RegistrationTimeout = 10 * time.Minute
	}
	if opts.RecreationDelay <= 0 {
		opts.RecreationDelay = 10 * time.Minute
	}
	if opts.GitHubURL == "" {
		opts.GitHubURL = "https://github.com"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reconciler{kube: kube, gh: gh, clock: clk, log: log, opts: opts, templates: map[string]built{}}
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		tmpl, err := runnerpod.Template(p)
		if err != nil {
			return nil, err
		}
		r.templates[p.Name] = built{tmpl: tmpl, hash: runnerpod.Hash(p, tmpl)}
	}
	return r, nil
}

// sweep is one pool's reconcile: its observations and what it did.
type sweep struct {
	p        *pool.Pool
	d        scaling.Decision
	st       *poolstate.Status
	now      time.Time
	runners  []*runner
	gh       *github
	created  int
	deleted  int
	marked   int
	log      *slog.Logger
	template built
}

// Reconcile brings the pool's runners in line with d and records phases and the
// last sync time in st. An error leaves the rest for the next sweep.
func (r *Reconciler) Reconcile(ctx context.Context, p *pool.Pool, d scaling.Decision, st *poolstate.Status) error {
	start := r.clock.Now()
	s := &sweep{p: p, d: d, st: st, now: start, gh: &github{api: r.gh}, log: r.log.With("pool", p.Name),
		template: r.templates[p.Name]}
	var err error
	if s.runners, err = r.observe(ctx, p, s.now); err != nil {
		return err
	}
	// A failed step does not stop the others: each runner's progress is its own,
	// and a flaky API must not keep a pool from unregistering or creating runners.
	var errs []error
	for _, stage := range []func(context.Context, *sweep) error{r.register, r.sync, r.stop, r.cleanup} {
		if err := stage(ctx, s); err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	st.Phases = phases(s.runners)
	r.emit(s, r.clock.Since(start))
	return errors.Join(errs...)
}

// stop drives the graceful stop of every runner being stopped: marked ones, and
// pods deleted by someone else (held by the finalizer). Unregistered runners'
// owners are deleted.
func (r *Reconciler) stop(ctx context.Context, s *sweep) error {
	var errs []error
	for _, rn := range s.runners {
		if err := r.stopOne(ctx, s, rn); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *Reconciler) stopOne(ctx context.Context, s *sweep, rn *runner) error {
	if rn.pod != nil && rn.pod.DeletionTimestamp != nil && !rn.marked() && hasFinalizer(rn.pod) {
		// Deleted by hand: its credentials are spent, so the whole runner goes.
		if err := r.mark(ctx, s, rn); err != nil {
			return err
		}
	}
	if !rn.marked() {
		return nil
	}
	if err := r.ensurePodMarked(ctx, rn); err != nil {
		return err
	}
	res, err := r.gracefulStop(ctx, s.p, rn, s.gh, s.now)
	if err != nil || res != stopDone {
		return err
	}
	return r.deleteRunner(ctx, s, rn)
}

// register annotates pods with their runner id once GitHub lists them online or
// busy; the list is fetched only when a running pod is not yet registered.
func (r *Reconciler) register(ctx context.Context, s *sweep) error {
	for _, rn := range s.runners {
		if rn.marked() || rn.registered() || rn.pod == nil || rn.pod.Status.Phase != corev1.PodRunning || rn.pod.DeletionTimestamp != nil {
			continue
		}
		gr, found, err := s.gh.byName(ctx, s.p.Scope(), runnerpod.PodName(rn.name()))
		if err != nil {
			s.log.Warn("cannot list runners to record registrations", "error", err)
			return nil
		}
		if !found || gr.Status != "online" && !gr.Busy {
			continue
		}
		if err := r.annotatePod(ctx, rn, runnerpod.AnnotationRunnerID, idString(gr.ID)); err != nil {
			return err // the next sweep records it
		}
		if rn.phase == TimedOut {
			rn.phase = Running
		}
	}
	return nil
}

// sync is ARC's syncRunnerPodsOwners: replace completed, timed-out and outdated
// runners, then scale the up-to-date ones to the desired count.
func (r *Reconciler) sync(ctx context.Context, s *sweep) error {
	var regular []*runner
	var errs []error
	for _, rn := range s.runners {
		switch {
		case rn.marked() || rn.phase == Terminating:
		case rn.phase == Completed || rn.phase == TimedOut || rn.outdated(s.template.hash):
			if err := r.mark(ctx, s, rn); err != nil {
				errs = append(errs, err) // still counts as not regular: replaced below
			}
		default:
			regular = append(regular, rn)
		}
	}
	switch n := len(regular); {
	case n > s.d.Desired:
		errs = append(errs, r.scaleDown(ctx, s, regular, n-s.d.Desired))
	case n < s.d.Desired:
		errs = append(errs, r.scaleUp(ctx, s, s.d.Desired-n))
	}
	return errors.Join(errs...)
}

// scaleDown marks the surplus for unregistration: pending runners first, then idle
// ones, then busy ones (whose unregistration waits for their job), newest first in
// each group, so the oldest running runners stay.
func (r *Reconciler) scaleDown(ctx context.Context, s *sweep, regular []*runner, surplus int) error {
	busy := map[string]bool{}
	if list, err := s.gh.runners(ctx, s.p.Scope()); err == nil {
		for _, gr := range list {
			busy[gr.Name] = gr.Busy
		}
	}
	rank := func(rn *runner) int {
		switch {
		case rn.phase != Running:
			return 0
		case !busy[runnerpod.PodName(rn.name())]:
			return 1
		}
		return 2
	}
	for group := 0; group <= 2 && surplus > 0; group++ {
		for i := len(regular) - 1; i >= 0 && surplus > 0; i-- {
			if rank(regular[i]) != group {
				continue
			}
			if err := r.mark(ctx, s, regular[i]); err != nil {
				return err
			}
			surplus--
		}
	}
	return nil
}

// scaleUp creates missing runners — unless the pool is ephemeral, the last sync is
// newer than the newest reservation and recent, and no job is waiting: then a
// runner has just finished and the webhook has not caught up yet (ARC's
// EffectiveTime hold). The last condition is ours: a queued job is one no runner
// has taken, so it is real demand; without it, a pool at maxReplicas with a
// backlog starves for the whole delay each time its runners finish, because no
// new reservation moves the effective time.
func (r *Reconciler) scaleUp(ctx context.Context, s *sweep, missing int) error {
	last, eff := s.st.LastSync, s.d.EffectiveTime
	if s.p.IsEphemeral() && !eff.IsZero() && !last.IsZero() && last.After(eff) && s.now.Before(last.Add(r.opts.RecreationDelay)) &&
		s.d.Queued == 0 {
		s.log.Info("holding creation: ephemeral runners finished and no newer reservation arrived",
			"missing", missing, "lastSync", last, "effectiveTime", eff, "until", last.Add(r.opts.RecreationDelay))
		return nil
	}
	for range missing {
		if err := r.create(ctx, s); err != nil {
			return err
		}
		s.created++
		s.st.LastSync = s.now
	}
	return nil
}

// create makes one runner: credentials first (a JIT config registers the runner
// name on GitHub), then the Secret, then the StatefulSet, then the Secret's owner.
// A crash in between leaves an ownerless Secret or an unused GitHub runner, which
// cleanup removes.
func (r *Reconciler) create(ctx context.Context, s *sweep) error {
	p := s.p
	name := runnerpod.NewName(p.Name)
	creds, err := r.credentials(ctx, s, name)
	if err != nil {
		return err
	}
	spec := runnerpod.Spec{Pool: p, Template: s.template.tmpl, Hash: s.template.hash, Name: name,
		GitHubURL: r.opts.GitHubURL, Creds: creds, Now: s.now}
	sec, err := r.kube.CoreV1().Secrets(p.Kubernetes.Namespace).Create(ctx, runnerpod.Secret(spec), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating secret of runner %s: %w", name, err)
	}
	sts, err := r.kube.AppsV1().StatefulSets(p.Kubernetes.Namespace).Create(ctx, runnerpod.StatefulSet(spec), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating statefulset of runner %s: %w", name, err)
	}
	s.runners = append(s.runners, &runner{sts: sts, phase: Pending})
	runnerpod.Own(sec, sts)
	if _, err := r.kube.CoreV1().Secrets(p.Kubernetes.Namespace).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("owning secret of runner %s: %w", name, err)
	}
	s.log.Info("runner created", "runner", name, "runnerId", creds.RunnerID)
	return nil
}

func (r *Reconciler) credentials(ctx context.Context, s *sweep, name string) (runnerpod.Credentials, error) {
	p := s.p
	if !p.IsEphemeral() {
		tok, err := r.gh.RegistrationToken(ctx, p.Scope())
		s.gh.count()
		if err != nil {
			return runnerpod.Credentials{}, fmt.Errorf("registration token for runner %s: %w", name, err)
		}
		return runnerpod.Credentials{Token: tok.Token}, nil
	}
	group, err := r.gh.RunnerGroupID(ctx, p.Scope(), p.Group)
	if err != nil {
		return runnerpod.Credentials{}, fmt.Errorf("runner group of pool %s: %w", p.Name, err)
	}
	jit, err := r.gh.JITConfig(ctx, p.Scope(), runnerpod.PodName(name), p.AllLabels(), group)
	s.gh.count()
	if err != nil {
		return runnerpod.Credentials{}, fmt.Errorf("JIT config for runner %s: %w", name, err)
	}
	return runnerpod.Credentials{RunnerID: jit.RunnerID, JITConfig: jit.EncodedConfig}, nil
}

// mark requests the runner's unregistration (owner and pod), as ARC's
// unregistration-request-timestamp.
func (r *Reconciler) mark(ctx context.Context, s *sweep, rn *runner) error {
	if !rn.marked() {
		if err := r.annotate(ctx, "statefulset", rn.sts.Namespace, rn.name(), runnerpod.AnnotationUnregistrationRequest, stamp(s.now)); err != nil {
			return err
		}
		if rn.sts.Annotations == nil {
			rn.sts.Annotations = map[string]string{}
		}
		rn.sts.Annotations[runnerpod.AnnotationUnregistrationRequest] = stamp(s.now)
		s.marked++
	}
	return r.ensurePodMarked(ctx, rn)
}

func (r *Reconciler) ensurePodMarked(ctx context.Context, rn *runner) error {
	if rn.pod == nil {
		return nil
	}
	if _, ok := rn.pod.Annotations[runnerpod.AnnotationUnregistrationRequest]; ok {
		return nil
	}
	return r.annotatePod(ctx, rn, runnerpod.AnnotationUnregistrationRequest, rn.sts.Annotations[runnerpod.AnnotationUnregistrationRequest])
}

// deleteRunner lets the unregistered pod go (finalizer) and deletes its owner; the
// Secret and the pod follow by garbage collection.
func (r *Reconciler) deleteRunner(ctx context.Context, s *sweep, rn *runner) error {
	if rn.pod != nil && hasFinalizer(rn.pod) {
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := r.kube.CoreV1().Pods(rn.pod.Namespace).Patch(ctx, rn.pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing finalizer of pod %s: %w", rn.pod.Name, err)
		}
	}
	policy := metav1.DeletePropagationBackground
	err := r.kube.AppsV1().StatefulSets(rn.sts.Namespace).Delete(ctx, rn.name(), metav1.DeleteOptions{
		PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &rn.sts.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting statefulset %s: %w", rn.name(), err)
	}
	rn.phase = Terminating
	s.deleted++
	s.log.Info("runner deleted", "runner", rn.name())
	return nil
}

func (r *Reconciler) annotatePod(ctx context.Context, rn *runner, key, value string) error {
	if err := r.annotate(ctx, "pod", rn.pod.Namespace, rn.pod.Name, key, value); err != nil {
		return err
	}
	if rn.pod.Annotations == nil {
		rn.pod.Annotations = map[string]string{}
	}
	rn.pod.Annotations[key] = value
	return nil
}

func (r *Reconciler) annotate(ctx context.Context, kind, ns, name, key, value string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	var err error
	if kind == "pod" {
		_, err = r.kube.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = r.kube.AppsV1().StatefulSets(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		return fmt.Errorf("annotating %s %s with %s: %w", kind, name, key, err)
	}
	return nil
}

// cleanup removes what a crash between creation steps can leave: within the
// recreation delay after a creation, ownerless Secrets (adopted when their
// StatefulSet exists, deleted otherwise) and the pool's GitHub runners that no
// StatefulSet explains and that are not busy.
func (r *Reconciler) cleanup(ctx context.Context, s *sweep) error {
	// Only sweeps after a creating one: the creating sweep itself left nothing
	// behind that it knows of, and skipping it keeps the fast path short.
	if s.created > 0 || s.st.LastSync.IsZero() || s.now.Sub(s.st.LastSync) > r.opts.RecreationDelay {
		return nil
	}
	names := map[string]*appsv1.StatefulSet{}
	for _, rn := range s.runners {
		names[rn.name()] = rn.sts
	}
	if err := r.cleanupSecrets(ctx, s, names); err != nil {
		return err
	}
	list, err := s.gh.runners(ctx, s.p.Scope())
	if err != nil {
		return nil // the next sweep retries
	}
	own := regexp.MustCompile(`^` + regexp.QuoteMeta(s.p.Name) + `-[b-z2-9]{5}-0$`)
	for _, gr := range list {
		name := gr.Name[:max(0, len(gr.Name)-2)]
		if !own.MatchString(gr.Name) || names[name] != nil || gr.Busy {
			continue
		}
		if err := s.gh.remove(ctx, s.p.Scope(), gr.ID); err == nil {
			s.log.Info("removed a GitHub runner no StatefulSet explains", "runner", gr.Name, "id", gr.ID)
		}
	}
	return nil
}

func (r *Reconciler) cleanupSecrets(ctx context.Context, s *sweep, names map[string]*appsv1.StatefulSet) error {
	ns := s.p.Kubernetes.Namespace
	secs, err := r.kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: runnerpod.LabelPool + "=" + s.p.Name})
	if err != nil {
		return fmt.Errorf("listing secrets of pool %s: %w", s.p.Name, err)
	}
	for i := range secs.Items {
		sec := &secs.Items[i]
		if len(sec.OwnerReferences) > 0 || sec.DeletionTimestamp != nil {
			continue
		}
		if sts := names[sec.Name]; sts != nil {
			runnerpod.Own(sec, sts)
			if _, err := r.kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("adopting secret %s: %w", sec.Name, err)
			}
			continue
		}
		if s.now.Sub(sec.CreationTimestamp.Time) < time.Minute {
			continue // its creation may still be under way (it is not: we hold the lease; but be safe)
		}
		if err := r.kube.CoreV1().Secrets(ns).Delete(ctx, sec.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting orphaned secret %s: %w", sec.Name, err)
		}
	}
	return nil
}

func phases(runners []*runner) map[string]int {
	out := map[string]int{}
	for _, rn := range runners {
		ph := rn.phase
		if rn.marked() && ph != Terminating {
			ph = Stopping
		}
		out[string(ph)]++
	}
	return out
}
