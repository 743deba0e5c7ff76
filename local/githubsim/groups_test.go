package githubsim_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestRunnersTakeOnlyJobsTheirGroupAdmits: as on GitHub, a runner of a group
// of selected repositories passes over an older job of another repository,
// which a runner of the Default group then takes; a runner of a group of
// private repositories passes over a public repository's job, whose delivery
// says public. GroupAdmits answers the same.
func TestRunnersTakeOnlyJobsTheirGroupAdmits(t *testing.T) {
	sim := githubsim.New(githubsim.Options{PATs: []string{"ghp_x"}})
	apispec.Verify(t, sim)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	private := map[int64]bool{}
	sim.OnDelivery(func(_, _ string, payload []byte) int {
		var p struct {
			WorkflowJob struct{ ID int64 } `json:"workflow_job"`
			Repository  struct{ Private bool }
		}
		if err := json.Unmarshal(payload, &p); err != nil {
			t.Error(err)
		}
		private[p.WorkflowJob.ID] = p.Repository.Private
		return http.StatusOK
	})
	acme := scope.Scope{Organization: "acme"}
	sim.AddGroup(acme, "ml", []string{"acme/ml"})
	sim.AddGroup(acme, "inner", nil)
	if err := sim.SetGroupAccess(acme, "Inner", githubsim.VisibilityPrivate, nil); err != nil {
		t.Fatal(err)
	}
	sim.SetRepositoryPublic("acme/Pub", true)
	register := func(name, group string) githubsim.Runner {
		t.Helper()
		rn, err := sim.Register(githubsim.Registration{Token: registrationToken(t, srv.URL, acme), Scope: acme.String(),
			Name: name, Group: group})
		if err != nil {
			t.Fatal(err)
		}
		return rn
	}
	queue := func(repo string) githubsim.Job {
		return sim.QueueJob(githubsim.JobSpec{Repository: repo, Organization: "acme", Labels: []string{"self-hosted"}})
	}
	app, ml, pub, priv := queue("acme/app"), queue("acme/ml"), queue("acme/pub"), queue("acme/priv")
	if private[pub.ID] || !private[priv.ID] {
		t.Fatalf("deliveries say private %v; want acme/pub public and acme/priv private", private)
	}

	acquire := func(rn githubsim.Runner) (githubsim.Job, bool) {
		t.Helper()
		j, ok, err := sim.AcquireJob(rn.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if err := sim.CompleteJobAs(j.ID, githubsim.JobSuccess); err != nil {
				t.Fatal(err)
			}
		}
		return j, ok
	}
	mlRunner := register("ml-1", "ml")
	if j, ok := acquire(mlRunner); !ok || j.ID != ml.ID {
		t.Fatalf("the ml group's runner took %+v (%v); want job %d of acme/ml, not the older one of acme/app", j, ok, ml.ID)
	}
	if j, ok := acquire(mlRunner); ok {
		t.Fatalf("the ml group's runner took job %d of %s; want none it may take", j.ID, j.Repository)
	}
	innerRunner := register("inner-1", "inner")
	if j, ok := acquire(innerRunner); !ok || j.ID != app.ID {
		t.Fatalf("the inner group's runner took %+v (%v); want job %d of the private acme/app", j, ok, app.ID)
	}
	if j, ok := acquire(innerRunner); !ok || j.ID != priv.ID {
		t.Fatalf("the inner group's runner took %+v (%v); want job %d of acme/priv, passing over the public acme/pub", j, ok, priv.ID)
	}
	if j, ok := acquire(register("any-1", "")); !ok || j.ID != pub.ID {
		t.Fatalf("the Default group's runner took %+v (%v); want job %d of acme/pub", j, ok, pub.ID)
	}
	for _, c := range []struct {
		group, repo string
		want        bool
	}{{"ml", "acme/ML", true}, {"ml", "acme/app", false}, {"inner", "acme/pub", false}, {"inner", "acme/app", true}, {"", "acme/pub", true}} {
		if got := sim.GroupAdmits(acme, c.group, c.repo); got != c.want {
			t.Errorf("GroupAdmits(%q, %q) = %v, want %v", c.group, c.repo, got, c.want)
		}
	}
	if err := sim.SetGroupAccess(acme, "nope", githubsim.VisibilityAll, nil); !errors.Is(err, githubsim.ErrUnknownGroup) {
		t.Errorf("unknown group: %v", err)
	}
	if err := sim.SetGroupAccess(acme, "ml", "internal", nil); !errors.Is(err, githubsim.ErrUnknownVisibility) {
		t.Errorf("unknown visibility: %v", err)
	}
}
