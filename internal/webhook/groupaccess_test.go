package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// The queued fixture's job (repository Codertocat/Hello-World, public, of the
// organization Octocoders) fits all three pools by labels; with the gpu label
// only restricted. The tests store restricted's group as admitting another
// repository, and inner's as admitting private repositories only.
const groupedPools = `
pools:
  - name: restricted
    organization: Octocoders
    group: Selected-Group
    labels: [ubuntu-latest, gpu]
    maxReplicas: 5
    kubernetes: {namespace: runners, image: runner:1}
  - name: inner
    organization: Octocoders
    group: inner
    labels: [ubuntu-latest]
    maxReplicas: 5
    kubernetes: {namespace: runners, image: runner:1}
  - name: open
    organization: Octocoders
    labels: [ubuntu-latest]
    maxReplicas: 5
    kubernetes: {namespace: runners, image: runner:1}
`

// memAccess is what the sweeper stored, in memory; it counts the reads.
type memAccess struct {
	mu    sync.Mutex
	items map[string]groupaccess.Access
	reads map[string]int
}

func (m *memAccess) Get(_ context.Context, s scope.Scope, group string) (groupaccess.Access, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := s.String() + "#" + strings.ToLower(group)
	m.reads[k]++
	a, ok := m.items[k]
	return a, ok, nil
}

func (m *memAccess) set(group string, a groupaccess.Access) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items["organization/octocoders#"+strings.ToLower(group)] = a
}

func (m *memAccess) readsOf(group string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reads["organization/octocoders#"+strings.ToLower(group)]
}

type groupEnv struct {
	handler *webhook.Handler
	metrics *syncBuffer
	store   *reservation.Store
	access  *memAccess
	clock   *clocktesting.FakeClock
	logs    *syncBuffer
}

func newGroupEnv(t *testing.T) *groupEnv {
	t.Helper()
	cfg, err := pool.Parse([]byte(groupedPools))
	if err != nil {
		t.Fatal(err)
	}
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakeClock(fixtureTime)
	e := &groupEnv{store: reservation.New(db, name, clk), clock: clk, logs: &syncBuffer{}, metrics: &syncBuffer{},
		access: &memAccess{items: map[string]groupaccess.Access{}, reads: map[string]int{}}}
	metrics, err := emf.NewWriter(e.metrics, "")
	if err != nil {
		t.Fatal(err)
	}
	e.handler = webhook.New([]byte(secret), cfg, e.store, webhook.WithClock(clk), webhook.WithGroupAccess(e.access),
		webhook.WithLogger(slog.New(slog.NewJSONHandler(e.logs, nil))), webhook.WithMetrics(metrics))
	return e
}

func selectedAccess(repos ...string) groupaccess.Access {
	return groupaccess.Access{Visibility: groupaccess.Selected, Pages: []groupaccess.Page{{Repositories: repos}}}
}

// deliver sends body as delivery id and returns the answer and its log line.
func (e *groupEnv) deliver(t *testing.T, id string, body []byte) (webhook.Response, map[string]any) {
	t.Helper()
	hdr := headersFor("workflow_job", body)
	hdr["X-GitHub-Delivery"] = id
	before := len(e.logs.Bytes())
	resp := e.handler.Serve(t.Context(), hdr, body)
	var line map[string]any
	if err := json.Unmarshal(e.logs.Bytes()[before:], &line); err != nil {
		t.Fatalf("want one JSON log line: %q: %v", e.logs.Bytes()[before:], err)
	}
	return resp, line
}

// TestRoutingSkipsPoolsWhoseGroupRefusesTheRepository: a pool whose group, as
// stored, does not admit the job's repository is skipped, and the job goes to
// the next pool that fits, the log saying why; when none is left, the job is
// unrouted with the reason, kept for status; each pool a queued delivery's
// routing refused is counted (GroupRefusalsMetric). A private-only group refuses a
// public repository and admits it once the delivery says private; a group of
// which nothing is stored yet admits every repository, as before the check.
func TestRoutingSkipsPoolsWhoseGroupRefusesTheRepository(t *testing.T) {
	t.Parallel()
	e := newGroupEnv(t)
	e.access.set("selected-group", selectedAccess("Octocoders/other"))
	e.access.set("inner", groupaccess.Access{Visibility: groupaccess.Private})
	queued := fixture(t, "workflow_job/queued.payload.json")

	gpu := []byte(strings.Replace(string(queued), `"ubuntu-latest"`, `"ubuntu-latest", "gpu"`, 1))
	gpu = []byte(strings.Replace(string(gpu), `"labels": [`, `"labels": ["self-hosted", `, 1))
	resp, line := e.deliver(t, "d-gpu", gpu)
	const why = "group Selected-Group of pool restricted does not admit repository Codertocat/Hello-World"
	if resp.Status != 202 || !strings.Contains(resp.Reason, why) {
		t.Fatalf("gpu job: %d %q; want 202, unrouted because %q", resp.Status, resp.Reason, why)
	}
	us, err := e.store.UnroutedQueued(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 1 || !strings.Contains(us[0].Reason, why) {
		t.Fatalf("unrouted jobs %+v; want the gpu job, with why", us)
	}
	if line["outcome"] != "no-pool" {
		t.Fatalf("log line %v; want outcome %s", line, "no-pool")
	}

	resp, line = e.deliver(t, "d-plain", queued)
	if resp.Status != 200 || !strings.HasSuffix(resp.Reason, "for pool open") {
		t.Fatalf("plain job of a public repository: %d %q; want it recorded for pool open", resp.Status, resp.Reason)
	}
	skipped, _ := line["skipped"].(string)
	if !strings.Contains(skipped, "group inner of pool inner does not admit repository Codertocat/Hello-World") ||
		!strings.Contains(skipped, "private repositories only") || line["pool"] != "open" {
		t.Fatalf("log line %v; want pool open, and inner skipped with why", line)
	}

	private := []byte(strings.Replace(string(queued), `"private": false`, `"private": true`, 1))
	private = []byte(strings.Replace(string(private), `"id": 289782451`, `"id": 289782452`, 1))
	if resp, _ := e.deliver(t, "d-private", private); resp.Status != 200 || !strings.HasSuffix(resp.Reason, "for pool inner") {
		t.Fatalf("job of a private repository: %d %q; want it recorded for pool inner", resp.Status, resp.Reason)
	}

	inProgress := []byte(strings.Replace(string(gpu), `"action": "queued"`, `"action": "in_progress"`, 1))
	if resp, _ := e.deliver(t, "d-gpu-started", inProgress); resp.Status != 202 {
		t.Fatalf("in_progress of the gpu job: %d %q; want 202, unrouted", resp.Status, resp.Reason)
	}
	if got := e.refusals(t); !slices.Equal(got, []string{"restricted", "restricted", "inner", "restricted"}) {
		t.Fatalf("%s by pool, in order: %v; want one per pool each queued delivery's routing refused", webhook.GroupRefusalsMetric, got)
	}

	fresh := newGroupEnv(t) // nothing stored: routing as before the check
	gpu = []byte(strings.Replace(string(gpu), `"id": 289782451`, `"id": 289782453`, 1))
	if resp, _ := fresh.deliver(t, "d-fresh", gpu); resp.Status != 200 || !strings.HasSuffix(resp.Reason, "for pool restricted") {
		t.Fatalf("with no access stored: %d %q; want it recorded for pool restricted", resp.Status, resp.Reason)
	}
}

// refusals is the Pool of each GroupRefusalsMetric record written, in order.
func (e *groupEnv) refusals(t *testing.T) []string {
	t.Helper()
	var pools []string
	for _, line := range bytes.Split(bytes.TrimSpace(e.metrics.Bytes()), []byte("\n")) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("metric line %s: %v", line, err)
		}
		if n, ok := rec[webhook.GroupRefusalsMetric].(float64); ok && n == 1 {
			pools = append(pools, fmt.Sprint(rec["Pool"]))
		}
	}
	return pools
}

// TestGroupAccessIsCachedAMinute: within GroupAccessTTL, deliveries read each
// checked pool's group once, whether something is stored of it or not; a
// change in the table shows once the entry is that old.
func TestGroupAccessIsCachedAMinute(t *testing.T) {
	t.Parallel()
	e := newGroupEnv(t)
	e.access.set("selected-group", selectedAccess("Octocoders/other"))
	queued := fixture(t, "workflow_job/queued.payload.json")
	for i := range 3 {
		body := []byte(strings.Replace(string(queued), `"id": 289782451`, `"id": 28978246`+string(rune('0'+i)), 1))
		if resp, _ := e.deliver(t, "d-"+string(rune('a'+i)), body); !strings.HasSuffix(resp.Reason, "for pool inner") {
			t.Fatalf("delivery %d: %d %q; want pool inner (nothing stored of its group)", i, resp.Status, resp.Reason)
		}
		e.clock.Step(10 * time.Second)
	}
	if n, m := e.access.readsOf("inner"), e.access.readsOf("selected-group"); n != 1 || m != 1 {
		t.Fatalf("3 deliveries in 30 s read inner %d times and selected-group %d times; want each once", n, m)
	}
	e.access.set("inner", groupaccess.Access{Visibility: groupaccess.Private})
	body := []byte(strings.Replace(string(queued), `"id": 289782451`, `"id": 289782470`, 1))
	if resp, _ := e.deliver(t, "d-cached", body); !strings.HasSuffix(resp.Reason, "for pool inner") {
		t.Fatalf("within the minute: %q; want pool inner still (cached)", resp.Reason)
	}
	e.clock.Step(webhook.GroupAccessTTL)
	body = []byte(strings.Replace(string(queued), `"id": 289782451`, `"id": 289782471`, 1))
	if resp, _ := e.deliver(t, "d-expired", body); !strings.HasSuffix(resp.Reason, "for pool open") ||
		e.access.readsOf("inner") != 2 || e.access.readsOf("selected-group") != 2 {
		t.Fatalf("a minute later: %q, %d and %d reads; want pool open (inner refuses the public repository), each group read once more",
			resp.Reason, e.access.readsOf("inner"), e.access.readsOf("selected-group"))
	}
}

// TestLaterDeliveriesFindTheJobWhereItWasQueued: a job queued while its
// pool's group admitted the repository (nothing stored yet) keeps that pool
// as its home when the group refuses the repository by the time its
// in_progress and completed arrive: they are recorded on its item there,
// which stops counting, instead of on a new item in the next pool while the
// first keeps a reservation for a job that already ran.
func TestLaterDeliveriesFindTheJobWhereItWasQueued(t *testing.T) {
	t.Parallel()
	e := newGroupEnv(t)
	e.access.set("selected-group", selectedAccess("Octocoders/other"))
	queued := fixture(t, "workflow_job/queued.payload.json")
	if resp, _ := e.deliver(t, "d-queued", queued); !strings.HasSuffix(resp.Reason, "for pool inner") {
		t.Fatalf("queued: %d %q; want pool inner (nothing stored of its group)", resp.Status, resp.Reason)
	}
	e.access.set("inner", groupaccess.Access{Visibility: groupaccess.Private})
	e.clock.Step(webhook.GroupAccessTTL)
	for i, name := range []string{"in_progress.payload.json", "completed.success.with-organization.payload.json"} {
		if resp, _ := e.deliver(t, fmt.Sprint("d-", i), fixture(t, "workflow_job/"+name)); resp.Status != 200 || !strings.HasSuffix(resp.Reason, "for pool inner") {
			t.Fatalf("%s: %d %q; want it recorded for pool inner, where the job was queued", name, resp.Status, resp.Reason)
		}
	}
	for _, p := range []string{"inner", "open"} {
		if rs, err := e.store.Active(t.Context(), p); err != nil || len(rs) != 0 {
			t.Fatalf("after the job completed, pool %s counts %+v, %v; want nothing", p, rs, err)
		}
	}
}

// TestGroupAdmittingAfterTheQueuedCountsTheJobOnce: a job queued while inner's
// group did not admit its repository is recorded for pool open; the group
// then admits it, and routing now gives inner. The job's later deliveries are
// recorded on its item in open, where it was queued: no second item in inner,
// and once it completed neither pool counts it.
func TestGroupAdmittingAfterTheQueuedCountsTheJobOnce(t *testing.T) {
	t.Parallel()
	e := newGroupEnv(t)
	e.access.set("inner", groupaccess.Access{Visibility: groupaccess.Private})
	e.access.set("selected-group", selectedAccess("Octocoders/other"))
	queued := fixture(t, "workflow_job/queued.payload.json")
	if resp, _ := e.deliver(t, "d-queued", queued); !strings.HasSuffix(resp.Reason, "for pool open") {
		t.Fatalf("queued: %d %q; want pool open (inner's group refuses the repository)", resp.Status, resp.Reason)
	}
	e.access.set("inner", groupaccess.Access{Visibility: groupaccess.All})
	e.clock.Step(webhook.GroupAccessTTL)
	for i, name := range []string{"in_progress.payload.json", "completed.success.with-organization.payload.json"} {
		if resp, _ := e.deliver(t, fmt.Sprint("d-", i), fixture(t, "workflow_job/"+name)); resp.Status != 200 || !strings.HasSuffix(resp.Reason, "for pool open") {
			t.Fatalf("%s: %d %q; want it recorded for pool open, where the job was queued", name, resp.Status, resp.Reason)
		}
	}
	for _, p := range []string{"inner", "open"} {
		if rs, err := e.store.Active(t.Context(), p); err != nil || len(rs) != 0 {
			t.Fatalf("after the job completed, pool %s counts %+v, %v; want nothing", p, rs, err)
		}
	}
	if _, ok, err := e.store.Job(t.Context(), "inner", 289782451); err != nil || ok {
		t.Fatalf("inner has an item of the job (%v, %v): want none, the job was queued in open", ok, err)
	}
}
