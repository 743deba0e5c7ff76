package githubsim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// Every workflow_job delivery of a job's life, for a user's repository, an
// organization's and an enterprise's, with each conclusion, matches the
// webhook's schema (apispec.Verify checks them when the test ends).
func TestWorkflowJobDeliveriesConform(t *testing.T) {
	sim := githubsim.New(githubsim.Options{PATs: []string{"ghp_x"}})
	apispec.Verify(t, sim)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	var actions []string
	sim.OnDelivery(func(event, _ string, payload []byte) int {
		actions = append(actions, event)
		return http.StatusOK
	})
	sim.AddGroup(scope.Scope{Organization: "acme"}, "gpus", nil)
	cases := []struct {
		job        githubsim.JobSpec
		sc         scope.Scope
		group      string
		conclusion githubsim.JobConclusion
	}{
		{githubsim.JobSpec{Repository: "someone/app"}, scope.Scope{Repository: "someone/app"}, "", githubsim.JobSuccess},
		{githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"gpu"}},
			scope.Scope{Organization: "acme"}, "gpus", githubsim.JobFailure},
		{githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Enterprise: "big"},
			scope.Scope{Enterprise: "big"}, "", githubsim.JobCancelled},
	}
	for i, c := range cases {
		tok := registrationToken(t, srv.URL, c.sc)
		rn, err := sim.Register(githubsim.Registration{Token: tok, Scope: c.sc.String(), Name: "r-" + string(rune('a'+i)),
			Labels: c.job.Labels, Group: c.group, Ephemeral: true})
		if err != nil {
			t.Fatal(err)
		}
		j := sim.QueueJob(c.job)
		if _, ok, err := sim.AcquireJob(rn.ID); !ok || err != nil {
			t.Fatalf("%s: acquire: %v %v", c.sc, ok, err)
		}
		if err := sim.CompleteJobAs(j.ID, c.conclusion); err != nil {
			t.Fatal(err)
		}
	}
	if len(actions) != 3*len(cases) {
		t.Fatalf("%d deliveries, want %d", len(actions), 3*len(cases))
	}
}

// registrationToken gets a registration token for sc through the REST API,
// with a PAT.
func registrationToken(t *testing.T, url string, sc scope.Scope) string {
	t.Helper()
	path := map[scope.Kind]string{scope.Repository: "/repos/" + sc.Repository, scope.Organization: "/orgs/" + sc.Organization,
		scope.Enterprise: "/enterprises/" + sc.Enterprise}[sc.Kind()]
	req, err := http.NewRequestWithContext(t.Context(), "POST", url+path+"/actions/runners/registration-token", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token ghp_x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Token == "" {
		t.Fatalf("registration token for %s: %d %v", sc, resp.StatusCode, err)
	}
	return body.Token
}
