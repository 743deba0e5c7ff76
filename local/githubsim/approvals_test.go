package githubsim_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestJobWaitsForApproval: a job that deploys to an environment with required
// reviewers sends queued (its status already waiting) and waiting, each with its
// deployment; no runner takes it until it is approved, which sends queued again
// as a delivery of its own; then it runs. Every delivery matches GitHub's
// webhook schema (apispec.Verify, when the test ends).
func TestJobWaitsForApproval(t *testing.T) {
	sim := githubsim.New(githubsim.Options{PATs: []string{"ghp_x"}})
	apispec.Verify(t, sim)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	type sent struct{ guid, action, status, environment string }
	var deliveries []sent
	sim.OnDelivery(func(_, guid string, payload []byte) int {
		var p struct {
			Action      string
			WorkflowJob struct{ Status string } `json:"workflow_job"`
			Deployment  *struct{ Environment string }
		}
		if err := json.Unmarshal(payload, &p); err != nil {
			t.Errorf("delivery %s: %v", guid, err)
		}
		env := ""
		if p.Deployment != nil {
			env = p.Deployment.Environment
		}
		deliveries = append(deliveries, sent{guid, p.Action, p.WorkflowJob.Status, env})
		return http.StatusOK
	})
	sc := scope.Scope{Organization: "acme"}
	rn, err := sim.Register(githubsim.Registration{Token: registrationToken(t, srv.URL, sc), Scope: sc.String(), Name: "r-a",
		Labels: []string{"self-hosted"}, Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	j := sim.QueueJobForApproval(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted"}}, "production")
	if _, ok, err := sim.AcquireJob(rn.ID); ok || err != nil {
		t.Fatalf("a runner took the job waiting for its approval: %v %v", ok, err)
	}
	if err := sim.Approve(j.ID); err != nil {
		t.Fatal(err)
	}
	if err := sim.Approve(j.ID); !errors.Is(err, githubsim.ErrJobNotWaiting) {
		t.Fatalf("second approval: %v, want ErrJobNotWaiting", err)
	}
	if err := sim.Approve(j.ID + 100); !errors.Is(err, githubsim.ErrUnknownJob) {
		t.Fatalf("approval of an unknown job: %v, want ErrUnknownJob", err)
	}
	if got, ok, err := sim.AcquireJob(rn.ID); !ok || err != nil || got.ID != j.ID {
		t.Fatalf("acquire after the approval: %+v %v %v", got, ok, err)
	}
	if err := sim.CompleteJobAs(j.ID, githubsim.JobSuccess); err != nil {
		t.Fatal(err)
	}
	want := []sent{{"", "queued", "waiting", "production"}, {"", "waiting", "waiting", "production"},
		{"", "queued", "queued", "production"}, {"", "in_progress", "in_progress", "production"},
		{"", "completed", "completed", "production"}}
	var guids []string
	for i := range deliveries {
		guids = append(guids, deliveries[i].guid)
		deliveries[i].guid = ""
	}
	if !slices.Equal(deliveries, want) {
		t.Fatalf("deliveries %+v, want %+v", deliveries, want)
	}
	if slices.Sort(guids); len(slices.Compact(guids)) != len(want) {
		t.Fatalf("delivery ids %v are not all distinct", guids)
	}
}
