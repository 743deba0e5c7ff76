package reconcile_test

import (
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
)

// TestNewRejectsNonsenseOptions: a missing job↔runner link, each negative
// duration and a GitHubURL that is not an http(s) URL fail New with an error
// naming the field; the defaults and a full valid set are accepted.
func TestNewRejectsNonsenseOptions(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte("pools:\n  - {name: p, organization: acme, maxReplicas: 1, kubernetes: {namespace: ns, image: runner:1}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	links := reservation.New(nil, "table", clk)
	for field, opts := range map[string]reconcile.Options{
		"Options.JobLinks":            {},
		"Options.Roster":              {JobLinks: links},
		"Options.RegistrationTimeout": {JobLinks: links, RegistrationTimeout: -time.Minute},
		"Options.RecreationDelay":     {JobLinks: links, RecreationDelay: -time.Minute},
		"Options.CleanupInterval":     {JobLinks: links, CleanupInterval: -time.Hour},
		"Options.OrphanGrace":         {JobLinks: links, OrphanGrace: -time.Second},
		"Options.IdleConfirmation":    {JobLinks: links, IdleConfirmation: -time.Second},
		"Options.GitHubURL":           {JobLinks: links, GitHubURL: "github.com"},
	} {
		rec, err := reconcile.New(cfg, nil, nil, clk, nil, opts)
		if err == nil || rec != nil || !strings.Contains(err.Error(), field) {
			t.Errorf("New with %+v: %v, %v; want an error naming %s", opts, rec, err, field)
		}
	}
	ros := roster.NewStore(nil, "table")
	for _, opts := range []reconcile.Options{{JobLinks: links, Roster: ros}, {JobLinks: links, Roster: ros, RegistrationTimeout: time.Minute,
		RecreationDelay: time.Minute, CleanupInterval: time.Hour, OrphanGrace: time.Second, IdleConfirmation: time.Second,
		GitHubURL: "https://ghe.example.com", Deployment: "table"}} {
		if rec, err := reconcile.New(cfg, nil, nil, clk, nil, opts); err != nil || rec == nil {
			t.Errorf("New with %+v: %v; want a reconciler", opts, err)
		}
	}
}
