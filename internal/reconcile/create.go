package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// create makes one runner, writing the record of what it makes before making it:
//  1. the runner's Secret, empty, labelled with the pool — this deployment's
//     claim on the runner's name, on Kubernetes and on GitHub;
//  2. the credentials (a JIT config registers the runner on GitHub), written into
//     the Secret with the runner id;
//  3. the StatefulSet;
//  4. the StatefulSet made the Secret's owner.
//
// A step that fails undoes the ones before it. A crash between steps leaves an
// ownerless Secret, which cleanup finishes (its runner removed from GitHub first).
// Before the first creation of a template, the API server is asked to admit its
// StatefulSet (dryRun), so that a template it refuses costs no registration.
func (r *Reconciler) create(ctx context.Context, s *sweep) error {
	if err := r.dryRun(ctx, s); err != nil {
		return err
	}
	spec := r.spec(s, runnerpod.NewName(s.p.Name))
	id, err := r.enrol(ctx, s, spec.Name)
	if err != nil {
		return err
	}
	secrets := r.kube.CoreV1().Secrets(s.p.Kubernetes.Namespace)
	sec, err := secrets.Create(ctx, runnerpod.Secret(spec), metav1.CreateOptions{})
	if err != nil {
		return errors.Join(fmt.Errorf("creating secret of runner %s: %w", spec.Name, err), r.retire(ctx, s, spec.Name))
	}
	if err := r.record(ctx, s, id, roster.Record{SecretUID: string(sec.UID)}); err != nil {
		return errors.Join(err, r.undo(ctx, s, sec, 0))
	}
	sts, err := r.build(ctx, s, &spec, sec, id)
	switch {
	case errors.Is(err, errMaybeRegistered):
		return fmt.Errorf("%w (its secret stays: cleanup removes the runner if GitHub has it)", err)
	case errors.Is(err, errMaybeCreated):
		// Undone, the runner would be retired while its StatefulSet may
		// exist: foreign for ever. It stays live with its Secret: the next
		// sweep records the StatefulSet if there is one (claimStatefulSet),
		// and cleanup releases the runner once its Secret is an orphan.
		return fmt.Errorf("%w (its secret stays: the next sweep takes the statefulset if it was created, else cleanup removes the runner)", err)
	case err != nil:
		return errors.Join(err, r.undo(ctx, s, sec, spec.Creds.RunnerID))
	}
	s.runners = append(s.runners, &runner{sts: sts, id: id, phase: Pending})
	s.log.Info("runner created", "runner", spec.Name, "runnerId", spec.Creds.RunnerID)
	if err := r.record(ctx, s, id, roster.Record{StatefulSetUID: string(sts.UID)}); err != nil {
		// The next sweep records it (claimStatefulSet: the runner's entry has
		// no StatefulSet yet).
		return fmt.Errorf("recording the statefulset of runner %s: %w", spec.Name, err)
	}
	runnerpod.Own(sec, sts)
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("owning secret of runner %s (cleanup adopts it): %w", spec.Name, err)
	}
	return nil
}

// enrol puts the runner on the deployment's roster, with its pool's
// namespace and scope, before anything of it exists, so that no delivery
// about it can come before it is there, and every object of it can be
// recorded as it is made.
func (r *Reconciler) enrol(ctx context.Context, s *sweep, name string) (*roster.Runner, error) {
	id := &roster.Runner{Pool: s.p.Name, Name: runnerpod.PodName(name), Namespace: s.p.Kubernetes.Namespace,
		Scope: s.p.Scope().String(), Created: s.now}
	if err := r.opts.Roster.Add(ctx, *id, s.now); err != nil {
		return nil, err
	}
	return id, nil
}

// record records rec on the runner's roster entry id, and in id.
func (r *Reconciler) record(ctx context.Context, s *sweep, id *roster.Runner, rec roster.Record) error {
	if err := r.opts.Roster.Record(ctx, s.p.Name, id.Name, rec); err != nil {
		return err
	}
	switch {
	case rec.SecretUID != "":
		id.SecretUID = rec.SecretUID
	case rec.StatefulSetUID != "":
		id.StatefulSetUID = rec.StatefulSetUID
	case rec.GitHubID != 0:
		id.GitHubID = rec.GitHubID
	case rec.PodUID != "":
		id.PodUIDs = append(id.PodUIDs, rec.PodUID)
	}
	return nil
}

// retire marks the runner name gone on the roster (it lingers there for late
// deliveries: package roster). Each way a runner ends retires it before its
// last object goes (deleteRunner, finishOrphan, releaseSecret, undo), and
// stops there when the roster cannot be written: the object left brings the
// next sweep back. A runner whose Secret could not be created has no object
// left: when its retirement fails too, its name stays on the roster, the name
// of a runner that never existed.
func (r *Reconciler) retire(ctx context.Context, s *sweep, name string) error {
	return r.opts.Roster.Retire(ctx, s.p.Name, runnerpod.PodName(name), s.now)
}

// recordScope records, in the pool status, the scope in which this deployment
// creates the pool's runners: its scope in the pools file. A pool removed from
// the file later is drained only in a scope its deployment serves (see
// Removed), and the runners' own annotations cannot say which scope that is: the
// status can. Only a pool that wants runners records it: a removed pool (rebuilt
// from annotations) is always draining, and a pool of the file is draining only
// during a teardown, after its sweeps recorded its scope.
func recordScope(s *sweep) {
	if !s.p.IsDraining() {
		s.st.Scope = s.p.Scope().String()
	}
}

func (r *Reconciler) spec(s *sweep, name string) runnerpod.Spec {
	return runnerpod.Spec{Pool: s.p, Template: s.template.tmpl, Hash: s.template.hash, Name: name,
		GitHubURL: r.opts.GitHubURL, Deployment: r.opts.Deployment, Now: s.now}
}

// build gets the runner's credentials, records the runner id they give on
// the roster, writes them into its Secret (sec is updated in place) and
// creates its StatefulSet.
func (r *Reconciler) build(ctx context.Context, s *sweep, spec *runnerpod.Spec, sec *corev1.Secret, id *roster.Runner) (*appsv1.StatefulSet, error) {
	var err error
	if spec.Creds, err = r.credentials(ctx, s, spec.Name); err != nil {
		return nil, err
	}
	if spec.Creds.RunnerID != 0 {
		if err := r.record(ctx, s, id, roster.Record{GitHubID: spec.Creds.RunnerID}); err != nil {
			return nil, fmt.Errorf("recording the runner id of runner %s: %w", spec.Name, err)
		}
	}
	runnerpod.SetCredentials(sec, spec.Creds)
	filled, err := r.kube.CoreV1().Secrets(sec.Namespace).Update(ctx, sec, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("writing credentials of runner %s: %w", spec.Name, err)
	}
	*sec = *filled
	sts, err := r.kube.AppsV1().StatefulSets(sec.Namespace).Create(ctx, runnerpod.StatefulSet(*spec), metav1.CreateOptions{})
	if err != nil && maybeCreated(err) {
		return nil, fmt.Errorf("%w: creating statefulset of runner %s: %w", errMaybeCreated, spec.Name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("creating statefulset of runner %s: %w", spec.Name, err)
	}
	return sts, nil
}

// undo removes what a failed creation made, newest first: the JIT registration
// (RemoveRunner answered 204 or 404), then the Secret. When GitHub cannot be told,
// the Secret stays: it is the record from which cleanup removes the runner later.
// (A registration token registers nothing: there is only the Secret to delete.)
func (r *Reconciler) undo(ctx context.Context, s *sweep, sec *corev1.Secret, id int64) error {
	if id != 0 {
		if err := s.gh.remove(ctx, s.p.Scope(), id); err != nil && !errors.Is(err, githubapi.ErrNotFound) {
			return fmt.Errorf("undoing creation of runner %s: removing its registration %d (cleanup retries): %w", sec.Name, id, err)
		}
	}
	if err := r.retire(ctx, s, sec.Name); err != nil {
		return fmt.Errorf("undoing creation of runner %s (cleanup retries): %w", sec.Name, err)
	}
	err := r.kube.CoreV1().Secrets(sec.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sec.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("undoing creation of runner %s: deleting its secret (cleanup retries): %w", sec.Name, err)
	}
	s.log.Info("undid a failed runner creation", "runner", sec.Name, "runnerId", id)
	return nil
}

// dryRun asks the API server to admit the pool's StatefulSet (a server-side dry
// run: admission, validation and quota, nothing stored), once per template hash for
// the life of the process, before the first creation: a template it refuses (an
// invalid field Validate does not know, an admission policy, a StatefulSet quota)
// then fails the creation before GitHub registers a runner or a Secret is written.
// A refusal is not remembered: the next creation asks again (one write, no GitHub
// call). Refusals that come later (a quota filled since) are undone by create.
func (r *Reconciler) dryRun(ctx context.Context, s *sweep) error {
	if _, ok := r.admitted.Load(s.template.hash); ok {
		return nil
	}
	spec := r.spec(s, runnerpod.NewName(s.p.Name))
	spec.Creds = runnerpod.Credentials{JITConfig: "dry-run"}
	if s.p.UsesToken() {
		spec.Creds = runnerpod.Credentials{Token: "dry-run"}
	}
	_, err := r.kube.AppsV1().StatefulSets(s.p.Kubernetes.Namespace).Create(ctx, runnerpod.StatefulSet(spec),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return fmt.Errorf("pool %s: the API server does not admit its StatefulSet (dry run): %w", s.p.Name, err)
	}
	r.admitted.Store(s.template.hash, true)
	return nil
}

// errMaybeCreated: the StatefulSet create failed without an answer from the
// API server (a lost connection, a timeout, a 5xx): it may have been created.
var errMaybeCreated = errors.New("the API server may have created the statefulset")

func maybeCreated(err error) bool {
	var status apierrors.APIStatus
	return !errors.As(err, &status) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err)
}

// errMaybeRegistered: the JIT request failed without saying whether GitHub created
// the runner (a 5xx, a lost connection, a timeout). A definite refusal (4xx) did
// not; in particular a 409 means the name belongs to a runner that is not ours.
var errMaybeRegistered = errors.New("GitHub may have registered the runner")

func mayHaveRegistered(err error) bool {
	var netErr net.Error
	return errors.Is(err, githubapi.ErrServer) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr)
}

func (r *Reconciler) credentials(ctx context.Context, s *sweep, name string) (runnerpod.Credentials, error) {
	p := s.p
	if p.UsesToken() {
		tok, err := r.gh.RegistrationToken(ctx, p.Scope())
		if err != nil {
			return runnerpod.Credentials{}, fmt.Errorf("registration token for runner %s: %w", name, err)
		}
		return runnerpod.Credentials{Token: tok.Token, TokenExpiresAt: tok.ExpiresAt}, nil
	}
	group, err := r.gh.RunnerGroupID(ctx, p.Scope(), p.Group)
	if err != nil {
		return runnerpod.Credentials{}, fmt.Errorf("runner group of pool %s: %w", p.Name, err)
	}
	jit, err := r.gh.JITConfig(ctx, p.Scope(), runnerpod.PodName(name), p.AllLabels(), group)
	if err != nil && mayHaveRegistered(err) {
		err = fmt.Errorf("%w: %w", errMaybeRegistered, err)
	}
	if err != nil {
		return runnerpod.Credentials{}, fmt.Errorf("JIT config for runner %s: %w", name, err)
	}
	return runnerpod.Credentials{RunnerID: jit.RunnerID, JITConfig: jit.EncodedConfig}, nil
}
