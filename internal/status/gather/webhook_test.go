package gather_test

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/internal/status/gather"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestReportReadsTheDeliveryCheck: the report says "not checked" until a
// delivery check is in the table, then what it recorded, with its age — for
// the whole deployment and for one pool.
func TestReportReadsTheDeliveryCheck(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	kube, ns := testenv.Namespace(t)
	cfg, err := pool.Parse(fmt.Appendf(nil, "pools:\n  - {name: p, organization: o, maxReplicas: 1, kubernetes: {namespace: %s, image: i}}\n", ns))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	store := redeliver.NewStore(db, name)
	g := gather.New(cfg, reservation.New(db, name, clk), poolstate.NewStore(db, name), store, kube, clk)
	r, err := g.Report(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Webhook.State != status.WebhookNotChecked {
		t.Fatalf("webhook %+v before any check, want not checked", r.Webhook)
	}
	checked := now.Add(-12 * time.Minute)
	if err := store.Put(t.Context(), redeliver.Undelivered{CheckedAt: checked, Window: 30 * time.Minute, ByStatus: map[int]int{404: 2},
		Latest: &redeliver.FailedDelivery{At: checked.Add(-time.Minute), StatusCode: 404, Action: "completed", GUID: "g2"}}); err != nil {
		t.Fatal(err)
	}
	for _, only := range []string{"", "p"} {
		r, err := g.Report(t.Context(), only)
		if err != nil {
			t.Fatal(err)
		}
		h := r.Webhook
		if h.State != status.WebhookFailing || !h.Stale || h.Failed != 2 || h.AgeSeconds != 720 || !h.CheckedAt.Equal(checked) ||
			h.Latest == nil || h.Latest.GUID != "g2" || len(h.Hints) != 1 || h.Hints[0].Statuses[0] != 404 {
			t.Fatalf("report(%q) webhook %+v, want 2 × 404 checked 12m ago, stale", only, h)
		}
	}
}
