package reconcile_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestRegisteredRunnerLosesItsToken: a token runner's Secret holds the scope's
// registration token only until GitHub lists the runner. Running but not yet
// listed, it keeps it (its container may restart and need it); the sweep that
// sees it registered removes the token from the Secret, and the StatefulSet's
// record of a token (its expiry annotation). A removal that fails is done by
// the next sweep.
func TestRegisteredRunnerLosesItsToken(t *testing.T) {
	t.Parallel()
	for _, failFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("first removal fails %v", failFirst), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			t0 := e.clock.Now()
			e.mustSweep(1, t0)
			name := e.statefulSets()[0]
			if tok := e.secretToken(name); tok == "" || !e.tokenRecorded(name) {
				t.Fatalf("new runner: token %q, recorded %v; want both", tok, e.tokenRecorded(name))
			}
			e.run(name)
			e.mustSweep(1, t0)
			if tok := e.secretToken(name); tok == "" || !e.tokenRecorded(name) {
				t.Fatalf("running, not registered yet: token %q, recorded %v; want both kept", tok, e.tokenRecorded(name))
			}
			e.register(name)
			if failFirst {
				e.rec = failingSecretUpdates(t, e, 1)
			}
			e.mustSweep(1, t0)
			if !registered(t, e, name) {
				t.Fatal("the sweep did not record the registration")
			}
			if failFirst {
				if tok := e.secretToken(name); tok == "" || !e.tokenRecorded(name) {
					t.Fatalf("after a failed removal: token %q, recorded %v; want both kept, for the next sweep", tok, e.tokenRecorded(name))
				}
				e.mustSweep(1, t0)
			}
			if tok := e.secretToken(name); tok != "" || e.tokenRecorded(name) {
				t.Fatalf("registered: token %q, recorded %v; want neither", tok, e.tokenRecorded(name))
			}
			sec, err := e.raw.CoreV1().Secrets(e.ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil || sec.Labels[runnerpod.LabelPool] != "p" || len(sec.OwnerReferences) != 1 {
				t.Fatalf("secret %+v (%v): want it kept, the runner's record", sec, err)
			}
			e.mustSweep(1, t0) // nothing more to do, and nothing fails
			if got := e.statefulSets(); len(got) != 1 || got[0] != name {
				t.Fatalf("statefulsets %v, want %s still", got, name)
			}
		})
	}
}

// secretToken is the token in the runner's Secret ("" when there is none).
func (e *env) secretToken(name string) string {
	e.t.Helper()
	sec, err := e.raw.CoreV1().Secrets(e.ns).Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return string(sec.Data[runnerpod.SecretToken])
}

// tokenRecorded: the runner's StatefulSet records that its Secret holds a token.
func (e *env) tokenRecorded(name string) bool {
	e.t.Helper()
	list, err := e.raw.AppsV1().StatefulSets(e.ns).List(e.t.Context(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range list.Items {
		if s.Name == name {
			_, ok := s.Annotations[runnerpod.AnnotationTokenExpiresAt]
			return ok
		}
	}
	e.t.Fatalf("no statefulset %s", name)
	return false
}

// registered: the runner's pod records its runner id (GitHub listed it).
func registered(t *testing.T, e *env, name string) bool {
	t.Helper()
	pod, err := e.raw.CoreV1().Pods(e.ns).Get(t.Context(), runnerpod.PodName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, ok := pod.Annotations[runnerpod.AnnotationRunnerID]
	return ok
}

// failingSecretUpdates returns the env's reconciler on a client whose first n
// updates of a Secret (PUT) fail, as a lost connection would.
func failingSecretUpdates(t *testing.T, e *env, n int32) *reconcile.Reconciler {
	t.Helper()
	cfg := testenv.RESTConfig(t)
	var failed atomic.Int32
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/secrets/") && failed.Add(1) <= n {
				return nil, fmt.Errorf("injected failure of %s %s", req.Method, req.URL.Path)
			}
			return rt.RoundTrip(req)
		})
	})
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pools, err := pool.Parse([]byte(poolYAML(e.ns, e.pool.IsEphemeral(), "runner:1")))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(pools, kube, e.gh, e.clock, nil, reconcile.Options{JobLinks: e.links, Roster: e.roster})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
