package githubsim_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestRemovedLabelsStopHandOvers: once a runner's custom labels are removed,
// GitHub hands it no job that asks for one of them; a job that asks only for
// read-only labels it still takes. Another scope's runner id is a 404.
func TestRemovedLabelsStopHandOvers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.installationToken(t)
	regToken := decodeRegistrationToken(t, e.do(t, "POST", "/orgs/acme/actions/runners/registration-token", "token "+tok))
	r, err := e.sim.Register(githubsim.Registration{Token: regToken, Scope: scope.Scope{Organization: "acme"}.String(), Name: "a", Labels: []string{"big"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.sim.SetOnline(r.ID, true); err != nil {
		t.Fatal(err)
	}
	labels := fmt.Sprintf("/orgs/acme/actions/runners/%d/labels", r.ID)
	if got := e.do(t, "DELETE", fmt.Sprintf("/orgs/other/actions/runners/%d/labels", r.ID), "token "+tok).StatusCode; got != 404 {
		t.Fatalf("other scope: %d, want 404", got)
	}
	if got := e.do(t, "DELETE", labels, "token "+tok).StatusCode; got != 200 {
		t.Fatalf("remove labels: %d, want 200", got)
	}
	if rn, _ := e.sim.Runner(r.ID); !slices.Equal(rn.Labels, []string{"self-hosted", "Linux", "X64"}) {
		t.Fatalf("labels %v, want the read-only ones", rn.Labels)
	}
	big := e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted", "big"}})
	if j, ok, err := e.sim.AcquireJob(r.ID); err != nil || ok {
		t.Fatalf("handed job %d (%v, %v), want job %d not handed to a runner without its label", j.ID, ok, err, big.ID)
	}
	plain := e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted"}})
	if j, ok, err := e.sim.AcquireJob(r.ID); err != nil || !ok || j.ID != plain.ID {
		t.Fatalf("handed job %d (%v, %v), want job %d, which asks only for a read-only label", j.ID, ok, err, plain.ID)
	}
}

// TestHeldLabelRemoval: a held label removal changes nothing until released —
// the runner keeps its labels and is handed a job that asks for one — and is
// then answered as usual; the next removal is not held.
func TestHeldLabelRemoval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.installationToken(t)
	regToken := decodeRegistrationToken(t, e.do(t, "POST", "/orgs/acme/actions/runners/registration-token", "token "+tok))
	r, err := e.sim.Register(githubsim.Registration{Token: regToken, Scope: scope.Scope{Organization: "acme"}.String(), Name: "a", Labels: []string{"big"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.sim.SetOnline(r.ID, true); err != nil {
		t.Fatal(err)
	}
	hold := e.sim.HoldLabelRemoval(r.ID)
	t.Cleanup(hold.Release)
	labels := fmt.Sprintf("%s/orgs/acme/actions/runners/%d/labels", e.url, r.ID)
	answered := make(chan int, 1)
	go func() {
		status := 0
		defer func() { answered <- status }()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, labels, nil)
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "token "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		resp.Body.Close()
		status = resp.StatusCode
	}()
	select {
	case <-hold.Arrived():
	case <-time.After(10 * time.Second):
		t.Fatal("the label removal did not arrive")
	}
	big := e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted", "big"}})
	if j, ok, err := e.sim.AcquireJob(r.ID); err != nil || !ok || j.ID != big.ID {
		t.Fatalf("handed job %d (%v, %v) while the removal is held, want job %d: the runner still has its label", j.ID, ok, err, big.ID)
	}
	hold.Release()
	if got := <-answered; got != http.StatusOK {
		t.Fatalf("released removal answered %d, want 200", got)
	}
	if rn, _ := e.sim.Runner(r.ID); !slices.Equal(rn.Labels, []string{"self-hosted", "Linux", "X64"}) {
		t.Fatalf("labels %v after the released removal, want the read-only ones", rn.Labels)
	}
	if got := e.do(t, "DELETE", fmt.Sprintf("/orgs/acme/actions/runners/%d/labels", r.ID), "token "+tok).StatusCode; got != http.StatusOK {
		t.Fatalf("the next removal answered %d, want 200 (not held)", got)
	}
}
