package reconcile_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// The tests of this file need no stack: the reconciler acts on client-go's
// fake clientset (an object store, no controllers), for steps that only read
// and write objects — placeholders, budgets — and want no runner, so no
// GitHub call.

// errNoGitHubCall is what every call of unreachableGitHub returns.
var errNoGitHubCall = errors.New("no GitHub call expected")

// unreachableGitHub fails every call: a pool wanting no runner needs none.
type unreachableGitHub struct{}

func (unreachableGitHub) Runners(context.Context, scope.Scope) ([]githubapi.Runner, error) {
	return nil, errNoGitHubCall
}

func (unreachableGitHub) Runner(context.Context, scope.Scope, int64) (githubapi.Runner, error) {
	return githubapi.Runner{}, errNoGitHubCall
}

func (unreachableGitHub) RemoveRunner(context.Context, scope.Scope, int64) error {
	return errNoGitHubCall
}

func (unreachableGitHub) RemoveRunnerLabels(context.Context, scope.Scope, int64) error {
	return errNoGitHubCall
}

func (unreachableGitHub) JITConfig(context.Context, scope.Scope, string, []string, int64) (githubapi.JITConfig, error) {
	return githubapi.JITConfig{}, errNoGitHubCall
}

func (unreachableGitHub) RegistrationToken(context.Context, scope.Scope) (githubapi.RegistrationToken, error) {
	return githubapi.RegistrationToken{}, errNoGitHubCall
}

func (unreachableGitHub) RunnerGroupID(context.Context, scope.Scope, string) (int64, error) {
	return 0, errNoGitHubCall
}

// apiless is a reconciler of a pools file as deployment, on a fake clientset
// holding objects, at a fake clock's time.
type apiless struct {
	t     *testing.T
	kube  *fake.Clientset
	cfg   *pool.Config
	rec   *reconcile.Reconciler
	clock *clocktesting.FakeClock
}

func newAPILess(t *testing.T, deployment, poolsYAML string, objects ...runtime.Object) *apiless {
	t.Helper()
	cfg, err := pool.Parse([]byte(poolsYAML))
	if err != nil {
		t.Fatal(err)
	}
	a := &apiless{t: t, kube: fake.NewClientset(objects...), cfg: cfg,
		clock: clocktesting.NewFakeClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))}
	a.rec, err = reconcile.New(cfg, a.kube, unreachableGitHub{}, a.clock, nil,
		reconcile.Options{Roster: testenv.Roster(t), JobLinks: &jobLinks{}, Deployment: deployment})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// sweep reconciles the pool to no runner and records the outcome in st, as
// the sweeper does; it returns the reconciler's error.
func (a *apiless) sweep(name string, st *poolstate.Status) error {
	a.t.Helper()
	p := a.cfg.Pool(name)
	err := a.rec.Reconcile(a.t.Context(), p, scaling.Decide(p, nil, scaling.Previous{}, a.clock.Now()), st)
	st.RecordOutcome(a.clock.Now(), err)
	return err
}
