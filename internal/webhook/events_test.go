package webhook_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

var update = flag.Bool("update", false, "rewrite local/events/webhook-*.json from the fixtures")

// LocalSecret is the webhook secret of the local stack (local/env.json).
const localSecret = "local-webhook-secret"

// The event files `sam local invoke` and `make invoke` use: real payloads, signed
// with the local secret, in the HTTP API shape, and the status each must get.
var localEvents = []struct {
	file, fixture, event string
	sign                 bool
	status               int
}{
	{"webhook-queued.json", "workflow_job/queued.payload.json", "workflow_job", true, 200},
	{"webhook-in-progress.json", "workflow_job/in_progress.payload.json", "workflow_job", true, 200},
	{"webhook-completed.json", "workflow_job/completed.success.with-organization.payload.json", "workflow_job", true, 200},
	{"webhook-ping.json", "ping/with-app_id.payload.json", "ping", true, 200},
	{"webhook-bad-signature.json", "workflow_job/queued.payload.json", "workflow_job", false, 401},
}

func TestLocalEventFiles(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "local", "events")
	cfg, err := pool.Load(filepath.Join("..", "..", "local", "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		for _, ev := range localEvents {
			body := fixture(t, ev.fixture)
			h := map[string]string{"X-GitHub-Event": ev.event, "X-GitHub-Delivery": "local-" + strings.TrimSuffix(ev.file, ".json"),
				"Content-Type": "application/json", "X-Hub-Signature-256": sign(body, localSecret)}
			if !ev.sign {
				h["X-Hub-Signature-256"] = sign(body, "not-the-secret")
			}
			var pretty map[string]any
			if err := json.Unmarshal(httpAPI(h, body, false), &pretty); err != nil {
				t.Fatal(err)
			}
			raw, err := json.MarshalIndent(pretty, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, ev.file), append(raw, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	e := newEnvWith(t, cfg, localSecret)
	for _, ev := range localEvents {
		raw, err := os.ReadFile(filepath.Join(dir, ev.file))
		if err != nil {
			t.Fatalf("%v (regenerate with: go test ./internal/webhook -run TestLocalEventFiles -update)", err)
		}
		if resp := e.invoke(t, raw); resp.StatusCode != ev.status {
			t.Errorf("%s: status %d %q, want %d", ev.file, resp.StatusCode, resp.Body, ev.status)
		}
	}
}
