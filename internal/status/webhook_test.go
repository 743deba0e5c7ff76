package status_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/status"
)

// check is a delivery check made ago before now, over the default 30 minutes.
func check(ago time.Duration, byStatus map[int]int, latest *status.FailedDelivery) *status.DeliveryCheck {
	redeliverable := map[int]bool{}
	for code := range byStatus {
		redeliverable[code] = redeliver.Retryable(code)
	}
	return &status.DeliveryCheck{At: now.Add(-ago), Window: 30 * time.Minute, ByStatus: byStatus, Redeliverable: redeliverable, Latest: latest}
}

func renderWebhook(t *testing.T, w status.Webhook) string {
	t.Helper()
	var out bytes.Buffer
	if err := status.RenderWebhook(&out, w); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestWebhookFailing: three 401s and a 502 are counted; the line names the
// latest (a 401) with the secret-mismatch hint, and the 502's hint follows.
func TestWebhookFailing(t *testing.T) {
	t.Parallel()
	latest := &status.FailedDelivery{At: time.Date(2026, 11, 30, 11, 58, 5, 0, time.UTC), StatusCode: 401, Action: "queued", GUID: "g4"}
	c := check(30*time.Second, map[int]int{401: 3, 502: 1}, latest)
	c.Redelivered = 1
	w := status.NewWebhook(now, c)
	if w.State != status.WebhookFailing || w.Stale || w.Failed != 4 || !maps.Equal(w.ByStatus, map[int]int{401: 3, 502: 1}) ||
		w.Latest != latest || w.AgeSeconds != 30 || w.WindowSeconds != 1800 {
		t.Fatalf("webhook %+v", w)
	}
	if len(w.Hints) != 2 || !reflect.DeepEqual(w.Hints[0].Statuses, []int{401}) || !reflect.DeepEqual(w.Hints[1].Statuses, []int{502}) {
		t.Fatalf("hints %+v, want 401's then 502's", w.Hints)
	}
	out := renderWebhook(t, w)
	want := "webhook: 4 workflow_job deliveries GitHub could not get through in the last 30m (401 ×3, 502 ×1); " +
		"the last check redelivered 1; latest 11:58:05 UTC queued, 401 — the webhook secret in GitHub differs from the one in Secrets Manager\n" +
		"  502: the function failing or timing out — see its log; these are redelivered\n\n"
	if out != want {
		t.Fatalf("rendered\n%q\nwant\n%q", out, want)
	}
}

// TestWebhookHints: each status class has its hint, and the latest delivery's
// class comes first whatever the counts.
func TestWebhookHints(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code int
		text string
		hint string
	}{
		{401, "401", "the webhook secret in GitHub differs from the one in Secrets Manager"},
		{404, "404", "wrong webhook URL"},
		{410, "410", "wrong webhook URL"},
		{400, "400", "payload rejected — see the webhook's log"},
		{413, "413", "payload rejected"},
		{422, "422", "payload rejected"},
		{0, "no response", "the function failing or timing out — see its log; these are redelivered"},
		{500, "500", "the function failing or timing out"},
		{503, "503", "the function failing or timing out"},
		{504, "504", "the function failing or timing out"},
		{429, "429", "the function failing or timing out"},
		{403, "403", "refused — see the webhook's log"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			t.Parallel()
			latest := &status.FailedDelivery{At: now.Add(-time.Minute), StatusCode: tc.code, Action: "completed"}
			// Five 401s (or 502s) outnumber the latest's class, which still leads.
			other := 401
			if tc.code == 401 {
				other = 502
			}
			w := status.NewWebhook(now, check(time.Minute, map[int]int{tc.code: 1, other: 5}, latest))
			if len(w.Hints) != 2 || !strings.HasPrefix(w.Hints[0].Hint, tc.hint) || w.Hints[0].Statuses[0] != tc.code {
				t.Fatalf("hints %+v, want the %d's first: %q", w.Hints, tc.code, tc.hint)
			}
			line := strings.SplitN(renderWebhook(t, w), "\n", 2)[0]
			if !strings.Contains(line, "latest 11:59:00 UTC completed, "+tc.text+" — "+tc.hint) {
				t.Fatalf("line %q lacks the latest with its hint", line)
			}
		})
	}
}

// TestWebhookClean: a recent check with nothing failed says so, with when.
func TestWebhookClean(t *testing.T) {
	t.Parallel()
	w := status.NewWebhook(now, check(45*time.Second, map[int]int{}, nil))
	if w.State != status.WebhookOK || w.Stale || w.Failed != 0 || w.Hints != nil || !w.CheckedAt.Equal(now.Add(-45*time.Second)) {
		t.Fatalf("webhook %+v", w)
	}
	if out, want := renderWebhook(t, w), "webhook: no failed workflow_job deliveries in the last 30m (checked 11:59:15 UTC)\n\n"; out != want {
		t.Fatalf("rendered %q, want %q", out, want)
	}
}

// TestWebhookNotChecked: no check recorded yet.
func TestWebhookNotChecked(t *testing.T) {
	t.Parallel()
	w := status.NewWebhook(now, nil)
	if w.State != status.WebhookNotChecked || !w.CheckedAt.IsZero() || w.Stale {
		t.Fatalf("webhook %+v", w)
	}
	if out := renderWebhook(t, w); !strings.HasPrefix(out, "webhook: deliveries not checked yet") {
		t.Fatalf("rendered %q", out)
	}
}

// TestWebhookStale: a check older than StaleAfter is marked stale, whatever it
// found; one just within is not.
func TestWebhookStale(t *testing.T) {
	t.Parallel()
	if w := status.NewWebhook(now, check(status.StaleAfter, map[int]int{}, nil)); w.Stale {
		t.Fatalf("a check %v old is stale: %+v", status.StaleAfter, w)
	}
	clean := status.NewWebhook(now, check(14*time.Minute, map[int]int{}, nil))
	failing := status.NewWebhook(now, check(14*time.Minute, map[int]int{502: 2},
		&status.FailedDelivery{At: now.Add(-20 * time.Minute), StatusCode: 502, Action: "queued"}))
	for _, w := range []status.Webhook{clean, failing} {
		if !w.Stale {
			t.Fatalf("a check 14m old is not stale: %+v", w)
		}
		if out := renderWebhook(t, w); !strings.HasPrefix(out, "webhook (stale: checked 14m ago; each scheduled sweep checks — see the sweeper's log): ") {
			t.Fatalf("rendered %q, want it marked stale", out)
		}
	}
	if out := renderWebhook(t, failing); !strings.Contains(out, "2 workflow_job deliveries GitHub could not get through in the last 30m (502 ×2)") {
		t.Fatalf("a stale failing check hides its findings: %q", out)
	}
}

// TestReportCarriesTheWebhook: the report prints the webhook line above the
// pools, and its JSON carries the same data.
func TestReportCarriesTheWebhook(t *testing.T) {
	t.Parallel()
	r := status.Build(now, []status.Input{{Pool: "p", MaxReplicas: 2}}, nil)
	latest := &status.FailedDelivery{At: now.Add(-time.Minute), StatusCode: 0, Action: "queued", GUID: "g1"}
	r.Webhook = status.NewWebhook(now, check(time.Minute, map[int]int{0: 2}, latest))
	var out bytes.Buffer
	if err := status.RenderReport(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	hook, pools := strings.Index(text, "webhook: 2 workflow_job deliveries"), strings.Index(text, "POOL ")
	if hook != 0 || pools < hook || !strings.Contains(text, "(no response ×2)") {
		t.Fatalf("report:\n%s\nwant the webhook line first, then the pools", text)
	}
	out.Reset()
	if err := status.JSON(&out, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"byStatus": {`) || !strings.Contains(out.String(), `"0": 2`) {
		t.Errorf("JSON lacks the counts by status:\n%s", out.String())
	}
	var back status.Report
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Webhook, r.Webhook) {
		t.Fatalf("JSON round trip: %+v, want %+v", back.Webhook, r.Webhook)
	}
}

// TestReportShowsAHeldStop: a runner whose stop GitHub refused (403) is listed
// under RUNNERS HELD UP with the reason the sweep recorded, as a pending one is.
func TestReportShowsAHeldStop(t *testing.T) {
	t.Parallel()
	reason := "GitHub refused to remove the runner (403 Forbidden): grant the GitHub App ..."
	r := status.Report{At: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), Pools: []status.Pool{{Name: "octo", Runners: []status.Runner{
		{Name: "octo-abcde-0", Phase: status.PhaseStopping, Reason: reason},
		{Name: "octo-fghij-0", Phase: status.PhaseRunning},
	}}}}
	var out bytes.Buffer
	if err := status.RenderReport(&out, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "RUNNERS HELD UP") || !strings.Contains(out.String(), "octo-abcde-0") ||
		!strings.Contains(out.String(), "403 Forbidden") || strings.Contains(out.String(), "octo-fghij-0") {
		t.Fatalf("report:\n%s\nwant the held stop, and only it, under RUNNERS HELD UP", out.String())
	}
}
