// Package reconcile keeps one pool's runners on Kubernetes in line with the
// desired count, with ARC v0.22's semantics (syncRunnerPodsOwners,
// tickRunnerGracefulStop, EffectiveTime), made stateless: every step is a small
// idempotent write whose progress lives in annotations, so a sweep killed at any
// instant resumes on the next one without creating twice, losing a mark, or
// deleting a busy runner.
//
// Per sweep, under the pool's lease:
//  1. observe: one list of StatefulSets and one of pods; classify each runner;
//     then record the runner deaths the pods show and decide the pool's failed
//     jobs, re-running those whose runner died under them (rerun.go), before
//     any later step can delete a pod that shows a death;
//  2. register: record the runner id of pods GitHub lists (actions-runner/id) —
//     for a runner whose JIT config gave its id, only once half the registration
//     timeout has passed (see registrationCanWait);
//  3. sync: count out finishing runners (their job completed, their container
//     not exited yet: finishing.go); mark completed, timed-out, outdated and surplus runners; create missing
//     ones, unless an ephemeral runner just finished and the webhook has not yet
//     caught up (the EffectiveTime hold);
//  4. stop: pods deleted by someone else, and runners marked for unregistration,
//     go through the graceful stop; an owner whose pod is unregistered is deleted;
//  5. create (in grow): the runner's Secret first, as this deployment's record of
//     it, then its credentials, StatefulSet and the Secret's owner; a failed step
//     undoes the earlier ones;
//  6. finish orphans: pods that carry our finalizer but whose StatefulSet is gone
//     go through the graceful stop too before the finalizer (only ours) goes;
//  7. clean up, when due, what failed or interrupted creations left: ownerless
//     Secrets, and the GitHub runners named in them — never another runner;
//  8. headroom: keep the pool's placeholder pods (package headroom) at the
//     count its headroom setting wants (headroom.go);
//  9. guard against disruption (disruption.go): right after register, the pods
//     of runners running a job are annotated so autoscalers leave their nodes,
//     and idle ones are not; last, the pool's PodDisruptionBudget is kept (and
//     deleted once a draining pool has no runner left).
//
// Every annotation written on a runner is fenced by the resourceVersion the sweep
// read (fence.go): a second sweeper on the pool, one whose lease lapsed without
// its noticing, cannot overwrite the progress the other recorded.
package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
)

// Options tune the reconciler; zero values take ARC's defaults.
type Options struct {
	// RegistrationTimeout: a runner GitHub has not listed this long after its
	// creation is replaced (default 10m).
	RegistrationTimeout time.Duration
	// RecreationDelay: ARC's DefaultRunnerPodRecreationDelayAfterWebhookScale (default 10m).
	RecreationDelay time.Duration
	// GitHubURL is where runners register (default https://github.com).
	GitHubURL string
	// Metrics receives one CloudWatch Embedded Metric Format record per pool sweep (nil: none).
	Metrics *emf.Writer
	// CleanupInterval: cleanup runs at least this often (default 1h; also after
	// creations and failed ones, see cleanupDue).
	CleanupInterval time.Duration
	// OrphanGrace: an ownerless Secret this old is a leftover, not a creation under
	// way (default 1m).
	OrphanGrace time.Duration
	// FinishingFor: an ephemeral runner whose job is completed holds no slot
	// for this long while its container exits (default
	// DefaultFinishingFor; finishing.go).
	FinishingFor time.Duration
	// WorkflowPodGrace: a workflow pod (or the hooks' Secret) whose runner's
	// pod is gone is deleted once it has been so for this long (default
	// DefaultWorkflowPodGrace; workflow.go).
	WorkflowPodGrace time.Duration
	// Deployment names this deployment on the runners it makes (the table name in
	// AWS); Removed drains only runners that carry it (removed.go).
	Deployment string
	// JobLinks is the job↔runner link the webhook records (required): a runner
	// that holds a job by it is never asked to be removed (busy.go).
	JobLinks JobLinks
	// IdleConfirmation: a runner that may have taken a job is removed only after
	// GitHub listed it idle on two reads at least this far apart (default
	// DefaultIdleConfirmation; busy.go).
	IdleConfirmation time.Duration
	// RunnerListMaxAge: a scope's runner list read for one pool's sweep serves
	// the sweeps of the other pools of the scope for this long, for the answers
	// that make the sweeper wait (github.go). 0: each pool sweep reads its own.
	RunnerListMaxAge time.Duration
	// Queued reads other pools' waiting jobs (reservation.Store): an idle
	// runner is not stopped while a job of another pool that its labels match
	// waits, as GitHub could hand it that job (reach.go). nil: only the pool's
	// own waiting jobs hold its runners.
	Queued QueuedJobs
	// Reruns keeps runner deaths and failed jobs (rerun.Store): a job that
	// died with its runner is re-run within the pool's budget (rerun.go). nil:
	// no re-runs, and no deaths recorded.
	Reruns Reruns
	// Roster is the deployment's record of the runners it created and their
	// identity (roster.Store, required): a runner is added before anything of
	// it exists, the UID of each object of it recorded as it appears, and it
	// is retired before its last object goes — a create undone (create.go), a
	// runner deleted or an orphan finished (delete.go), a Secret released
	// (cleanup.go). An object is a runner's only by a UID recorded there
	// (identity.go); the webhook takes only runners on it for this
	// deployment's, and a failed job is re-run only when its runner is on its
	// pool's (rerun.go).
	Roster Roster
}

// Roster is the deployment's record of the runners it created (roster.Store).
type Roster interface {
	Add(ctx context.Context, rn roster.Runner, now time.Time) error
	Live(ctx context.Context, pool string) ([]roster.Runner, error)
	Record(ctx context.Context, pool, name string, rec roster.Record) error
	Retire(ctx context.Context, pool, name string, now time.Time) error
	Lookup(ctx context.Context, pool, name string) (roster.Runner, bool, error)
	// Has reports whether runner is on pool's roster, retired or not; an
	// error is the roster out of reach, and the caller asks again later.
	Has(ctx context.Context, pool, runner string) (bool, error)
}

// Reconciler reconciles pools. It implements the sweeper's Reconciler.
type Reconciler struct {
	kube      kubernetes.Interface
	gh        GitHub
	clock     clock.PassiveClock
	log       *slog.Logger
	opts      Options
	templates map[string]built
	// pools: the pools of the file (reachers).
	pools []pool.Pool
	// admitted: template hashes the API server admitted in a dry run (see dryRun).
	admitted sync.Map
	// deaths: runner deaths this process recorded ("<runner>/<key>", rerun.go).
	deaths sync.Map
	// headroomChecked: when each pool that wants no headroom placeholder was
	// last found to have none left (headroom.go); priorityClassReady: their
	// PriorityClass exists.
	headroomChecked    sync.Map
	priorityClassReady atomic.Bool
	// lists: the runner lists the pools' sweeps share (nil: not shared).
	lists *sharedLists
	// budgets: by namespace/name, the budgetState of each pool's
	// PodDisruptionBudget this Reconciler made sure of (disruption.go);
	// removedBudgetsChecked: by namespace, when it was last found to hold no
	// budget of a removed pool that has no runner left.
	budgets               sync.Map
	removedBudgetsChecked sync.Map
}

type built struct {
	tmpl corev1.PodTemplateSpec
	hash string
}

// New returns a reconciler for the pools of cfg; it fails when a pool's pod
// template is invalid, or Options.Validate rejects opts.
func New(cfg *pool.Config, kube kubernetes.Interface, gh GitHub, clk clock.PassiveClock, log *slog.Logger, opts Options) (*Reconciler, error) {
	if err := runnerpod.Validate(cfg); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reconciler{kube: kube, gh: gh, clock: clk, log: log, opts: opts, templates: map[string]built{}, pools: cfg.Pools}
	if opts.RunnerListMaxAge > 0 {
		r.lists = newSharedLists(clk, opts.RunnerListMaxAge)
	}
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

// Reconcile brings the pool's runners in line with d and records phases and the
// last sync time in st. An error leaves the rest for the next sweep.
func (r *Reconciler) Reconcile(ctx context.Context, p *pool.Pool, d scaling.Decision, st *poolstate.Status) error {
	start := r.clock.Now()
	s := &sweep{p: p, d: d, st: st, now: start, gh: &github{api: r.gh, shared: r.lists, start: start}, log: r.log.With("pool", p.Name),
		template: r.templates[p.Name], stats: sweepStats{vetoed: map[string]int{}}}
	ctx = s.gh.counting(ctx)
	var err error
	if err = r.observe(ctx, s); err != nil {
		s.logForeign()
		return err
	}
	err = r.stages(ctx, s)
	s.logForeign()
	st.Phases = phases(s.runners)
	st.Stuck = s.stuck
	st.Deferred = s.gh.deferral()
	st.Foreign = s.foreign
	r.emit(s, r.clock.Since(start))
	return err
}

// stages runs the sweep's stages in order; each returns what a later one
// consumes (sync's plan for grow, grow's outcome for cleanup). A failed stage
// does not stop the others: each runner's progress is its own, and a flaky API
// must not keep a pool from unregistering or creating runners. Deaths are
// recorded first, before a stop can delete the pod that shows one; a sweep
// that could not record them, or whose context ended, stops there.
func (r *Reconciler) stages(ctx context.Context, s *sweep) error {
	var errs []error
	done := func(err error) bool {
		errs = append(errs, err)
		return ctx.Err() != nil || errors.Is(err, errDeathsUnrecorded)
	}
	if done(r.reruns(ctx, s)) || done(r.register(ctx, s)) || done(r.markBusy(ctx, s)) || done(r.noteFinishing(ctx, s)) {
		return errors.Join(errs...)
	}
	want, err := r.sync(ctx, s)
	if done(err) || done(r.stop(ctx, s)) {
		return errors.Join(errs...)
	}
	grown, err := r.grow(ctx, s, want)
	if done(err) || done(r.finishRetired(ctx, s)) || done(r.finishOrphans(ctx, s)) || done(r.finishWorkflowObjects(ctx, s)) || done(r.cleanup(ctx, s, grown)) || done(r.headroom(ctx, s)) {
		return errors.Join(errs...)
	}
	done(r.guardBudget(ctx, s))
	return errors.Join(errs...)
}

// mark requests the runner's unregistration (owner and pod), as ARC's
// unregistration-request-timestamp. A runner another writer changed in this
// sweep (stale) is left alone.
func (r *Reconciler) mark(ctx context.Context, s *sweep, rn *runner) error {
	if rn.stale {
		return nil // another writer acts on it (ErrStale, already reported)
	}
	if !rn.marked() {
		err := r.annotateStatefulSet(ctx, rn, runnerpod.AnnotationUnregistrationRequest, stamp(s.now))
		switch {
		case apierrors.IsNotFound(err):
			// A StatefulSet gone since the list (deleted by hand) leaves its runner
			// to stop all the same: the mark goes on the pod.
			if rn.sts.Annotations == nil {
				rn.sts.Annotations = map[string]string{}
			}
			rn.sts.Annotations[runnerpod.AnnotationUnregistrationRequest] = stamp(s.now)
		case err != nil:
			return err
		}
		s.stats.marked++
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

// sweep is one pool's reconcile: its observations and what it did.
type sweep struct {
	p        *pool.Pool
	d        scaling.Decision
	st       *poolstate.Status
	now      time.Time
	runners  []*runner
	gh       *github
	log      *slog.Logger
	template built
	// stuck: why runners that are not running are held up (see stuckReason).
	stuck map[string]string
	// orphans: pods with our finalizer whose StatefulSet is gone, each tied to
	// its runner by the roster (finishOrphans).
	orphans []*runner
	// roster: the pool's live runners, by name (identity.go); foreign: the
	// objects of the pool's namespace that claim to be its runners' and are
	// on no roster entry (identity.go).
	roster  map[string]*roster.Runner
	foreign []string
	// retired: StatefulSets of retired runners whose deletion was cut short
	// (finishRetired).
	retired []*runner
	// named: the runner (pod) names the pool's pods and StatefulSets carry.
	named map[string]bool
	// waiting: other pools' waiting jobs, as read for this sweep (reach.go).
	waiting waiting
	// hook: the pods and Secrets the container hooks made in the pool's hook
	// namespace (container mode; workflow.go).
	hook hookObjects
	// stats: what the sweep did, for its metrics and log line alone (metrics.go).
	stats sweepStats
}

// noteStuck records why a runner is held up, for the pool status.
func (s *sweep) noteStuck(runner, reason string) {
	if s.stuck == nil {
		s.stuck = map[string]string{}
	}
	s.stuck[runner] = reason
}
