package webhook_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const secret = "test-webhook-secret-0123456789"

// Pools that the real payloads route to: the fixtures' repository belongs to the
// organization Octocoders and asks for ubuntu-latest; the deployment fixture's
// repository (a user's) asks for self-hosted + k8s.
const pools = `
pools:
  - name: octo
    organization: Octocoders
    labels: [ubuntu-latest]
    maxReplicas: 5
    kubernetes: {namespace: runners, image: runner:1}
  - name: elastic
    repository: lineville/elastic-machines-testing
    labels: [k8s]
    maxReplicas: 5
    kubernetes: {namespace: runners, image: runner:1}
`

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "github-webhooks", name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func sign(body []byte, key string) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// signSHA1 is GitHub's legacy X-Hub-Signature: HMAC-SHA1, valid but not accepted.
func signSHA1(body []byte, key string) string {
	mac := hmac.New(sha1.New, []byte(key))
	mac.Write(body)
	return "sha1=" + hex.EncodeToString(mac.Sum(nil))
}

type recordingNudger struct {
	mu     sync.Mutex
	pools  []string
	events []sweepevent.Event
	err    error
}

func (n *recordingNudger) Nudge(_ context.Context, ev sweepevent.Event) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pools = append(n.pools, ev.Pool)
	n.events = append(n.events, ev)
	return n.err
}

type env struct {
	handler *webhook.Handler
	store   *reservation.Store
	nudger  *recordingNudger
	logs    *syncBuffer
	db      *dynamodb.Client
	table   string
	// roster: the runners the deployment created (enrol).
	roster *roster.Store
}

// enrol puts runner on pool's roster, as the sweeper does when it creates it.
func (e *env) enrol(t *testing.T, pool, runner string) {
	t.Helper()
	if err := e.roster.Add(t.Context(), roster.Runner{Pool: pool, Name: runner}, fixtureTime); err != nil {
		t.Fatal(err)
	}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cfg, err := pool.Parse([]byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWith(t, cfg, secret)
}

// fixtureTime is a minute after the queued fixture's job was created
// (workflow_job.created_at): the store's clock in these tests, so that the
// fixtures' jobs are as young as when GitHub sent them.
var fixtureTime = time.Date(2021, 9, 13, 2, 22, 13, 0, time.UTC)

func newEnvWith(t *testing.T, cfg *pool.Config, secret string) *env {
	t.Helper()
	return newEnvAt(t, cfg, secret, clocktesting.NewFakePassiveClock(fixtureTime))
}

// newEnvAt is newEnvWith with the store on clk.
func newEnvAt(t *testing.T, cfg *pool.Config, secret string, clk clock.PassiveClock) *env {
	t.Helper()
	db, name := testenv.Table(t)
	e := &env{store: reservation.New(db, name, clk), nudger: &recordingNudger{}, logs: &syncBuffer{}, db: db, table: name,
		roster: roster.NewStore(db, name)}
	log := slog.New(slog.NewJSONHandler(e.logs, nil))
	e.handler = webhook.New([]byte(secret), cfg, e.store, webhook.WithNudger(e.nudger), webhook.WithLogger(log), webhook.WithRoster(e.roster))
	return e
}

// items counts the items in the pools' partitions.
func (e *env) items(t *testing.T) int {
	t.Helper()
	out, err := e.db.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(e.table), Select: "COUNT",
		FilterExpression:          aws.String("begins_with(PK, :pool)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pool": &types.AttributeValueMemberS{Value: "POOL#"}}})
	if err != nil {
		t.Fatal(err)
	}
	return int(out.Count)
}

// shape builds the JSON a Lambda receives for a request, in one of the event shapes.
type shape struct {
	name  string
	build func(headers map[string]string, body []byte) []byte
}

var shapes = []shape{
	{"http-api", func(h map[string]string, b []byte) []byte { return httpAPI(h, b, false) }},
	{"http-api-base64", func(h map[string]string, b []byte) []byte { return httpAPI(h, b, true) }},
	{"function-url", func(h map[string]string, b []byte) []byte { return functionURL(h, b, false) }},
	{"function-url-base64", func(h map[string]string, b []byte) []byte { return functionURL(h, b, true) }},
}

func encodeBody(b []byte, b64 bool) string {
	if b64 {
		return base64.StdEncoding.EncodeToString(b)
	}
	return string(b)
}

func httpAPI(h map[string]string, b []byte, b64 bool) []byte {
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /webhook", RawPath: "/webhook", Headers: lower(h),
		Body: encodeBody(b, b64), IsBase64Encoded: b64,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: "POST /webhook", Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/webhook"},
		},
	}
	raw, _ := json.Marshal(ev)
	return raw
}

func functionURL(h map[string]string, b []byte, b64 bool) []byte {
	ev := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/", Headers: h, // Function URLs keep the header case GitHub sent
		Body: encodeBody(b, b64), IsBase64Encoded: b64,
		RequestContext: events.LambdaFunctionURLRequestContext{
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/"},
		},
	}
	raw, _ := json.Marshal(ev)
	return raw
}

func lower(h map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[strings.ToLower(k)] = v
	}
	return out
}

// invoke runs the payload through aws-lambda-go's own decoding, as the runtime does.
func (e *env) invoke(t *testing.T, payload []byte) events.LambdaFunctionURLResponse {
	t.Helper()
	out, err := lambda.NewHandler(e.handler.Handle).Invoke(t.Context(), payload)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("decoding response %s: %v", out, err)
	}
	return resp
}

func headersFor(event string, body []byte) map[string]string {
	return map[string]string{
		"X-GitHub-Event": event, "X-GitHub-Delivery": "d-" + event, "Content-Type": "application/json",
		"X-Hub-Signature-256": sign(body, secret),
	}
}

func TestDeliveries(t *testing.T) {
	t.Parallel()
	queued := fixture(t, "workflow_job/queued.payload.json")
	noID := []byte(strings.Replace(string(queued), `"id": 289782451`, `"id": 0`, 1))
	noLabels := []byte(strings.Replace(string(queued), `"labels": [`, `"labelz": [`, 1))
	if bytes.Equal(noID, queued) || bytes.Equal(noLabels, queued) {
		t.Fatal("fixture edits did not apply")
	}
	big := append(bytes.Repeat([]byte(" "), webhook.DefaultMaxBody), '{', '}')
	unmatched := []byte(strings.Replace(string(queued), `"ubuntu-latest"`, `"windows-2022"`, 1))

	cases := []struct {
		name    string
		headers func() map[string]string
		body    []byte
		status  int
		reason  string
		active  int // active reservations afterwards
		nudges  int
	}{
		{"missing signature", func() map[string]string {
			h := headersFor("workflow_job", queued)
			delete(h, "X-Hub-Signature-256")
			return h
		}, queued, 401, "missing X-Hub-Signature-256", 0, 0},
		{"wrong signature", func() map[string]string {
			h := headersFor("workflow_job", queued)
			h["X-Hub-Signature-256"] = sign(queued, "another-secret")
			return h
		}, queued, 401, "does not match", 0, 0},
		{"malformed signature", func() map[string]string {
			h := headersFor("workflow_job", queued)
			h["X-Hub-Signature-256"] = "sha256=abc"
			return h
		}, queued, 401, "does not match", 0, 0},
		{"valid sha1 signature as X-Hub-Signature-256", func() map[string]string {
			h := headersFor("workflow_job", queued)
			h["X-Hub-Signature-256"] = signSHA1(queued, secret)
			return h
		}, queued, 401, "not a sha256= signature", 0, 0},
		{"valid sha1 signature as X-Hub-Signature only", func() map[string]string {
			h := headersFor("workflow_job", queued)
			delete(h, "X-Hub-Signature-256")
			h["X-Hub-Signature"] = signSHA1(queued, secret)
			return h
		}, queued, 401, "missing X-Hub-Signature-256", 0, 0},
		{"body over the cap", func() map[string]string { return headersFor("workflow_job", big) }, big, 400, "over the 1048576-byte limit", 0, 0},
		{"invalid JSON", func() map[string]string { return headersFor("workflow_job", []byte("{not json")) }, []byte("{not json"), 400, "invalid JSON at byte", 0, 0},
		{"no job id", func() map[string]string { return headersFor("workflow_job", noID) }, noID, 400, "no workflow_job.id", 0, 0},
		{"no labels", func() map[string]string { return headersFor("workflow_job", noLabels) }, noLabels, 400, "has no labels", 0, 0},
		{"ping", func() map[string]string { return headersFor("ping", fixture(t, "ping/payload.json")) }, fixture(t, "ping/payload.json"), 200, "pong", 0, 0},
		{"other event", func() map[string]string {
			return headersFor("workflow_run", fixture(t, "other/workflow_run.payload.json"))
		}, fixture(t, "other/workflow_run.payload.json"), 202, "ignored: event workflow_run", 0, 0},
		{"no matching pool", func() map[string]string { return headersFor("workflow_job", unmatched) }, unmatched, 202, "no matching pool", 0, 0},
		{"waiting", func() map[string]string {
			return headersFor("workflow_job", fixture(t, "workflow_job/waiting.payload.json"))
		}, fixture(t, "workflow_job/waiting.payload.json"), 200, "waiting job 12877621891: held for pool elastic", 0, 0},
		{"queued", func() map[string]string { return headersFor("workflow_job", queued) }, queued, 200, "queued job 289782451: applied for pool octo", 1, 1},
		{"queued behind a deployment", func() map[string]string {
			return headersFor("workflow_job", fixture(t, "workflow_job/queued.with-deployment.payload.json"))
		}, fixture(t, "workflow_job/queued.with-deployment.payload.json"), 200, "queued job 12877621891: held for pool elastic", 0, 0},
		{"in_progress", func() map[string]string {
			return headersFor("workflow_job", fixture(t, "workflow_job/in_progress.payload.json"))
		}, fixture(t, "workflow_job/in_progress.payload.json"), 200, "in_progress job 289782451: applied for pool octo", 1, 0},
		{"completed", func() map[string]string {
			return headersFor("workflow_job", fixture(t, "workflow_job/completed.success.with-organization.payload.json"))
		}, fixture(t, "workflow_job/completed.success.with-organization.payload.json"), 200, "completed job 289782451: applied for pool octo", 0, 0},
	}
	for _, tc := range cases {
		for _, sh := range shapes {
			t.Run(tc.name+"/"+sh.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t)
				resp := e.invoke(t, sh.build(tc.headers(), tc.body))
				if resp.StatusCode != tc.status || !strings.Contains(resp.Body, tc.reason) {
					t.Fatalf("response %d %q, want %d containing %q", resp.StatusCode, resp.Body, tc.status, tc.reason)
				}
				if n := e.items(t); tc.status != 200 && n != 0 {
					t.Fatalf("%d items written for a %d response, want none", n, tc.status)
				}
				var active int
				for _, p := range []string{"octo", "elastic"} {
					rs, err := e.store.Active(t.Context(), p)
					if err != nil {
						t.Fatal(err)
					}
					active += len(rs)
				}
				if active != tc.active || len(e.nudger.pools) != tc.nudges {
					t.Fatalf("active reservations %d, nudges %v; want %d and %d", active, e.nudger.pools, tc.active, tc.nudges)
				}
				// The nudge names its job, so the sweeper counts it even where its index read lags.
				for _, ev := range e.nudger.events {
					if len(ev.Jobs) != 1 || !strings.Contains(resp.Body, fmt.Sprintf("queued job %d: applied", ev.Jobs[0])) {
						t.Fatalf("nudge %+v for response %q, want the queued job's id", ev, resp.Body)
					}
				}
				logs := e.logs.String()
				if strings.Contains(logs, secret) || strings.Contains(logs, "Codertocat/Hello-World/actions/runs") {
					t.Fatalf("log leaks the secret or the payload:\n%s", logs)
				}
			})
		}
	}
}

func TestLifeCycleOfOneJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deliver := func(name string) int {
		body := fixture(t, "workflow_job/"+name)
		return e.invoke(t, httpAPI(headersFor("workflow_job", body), body, false)).StatusCode
	}
	// completed arrives first (reordering), then the late queued and in_progress.
	for _, f := range []string{"completed.failure.with-organization.payload.json", "queued.payload.json", "in_progress.payload.json", "queued.payload.json"} {
		if s := deliver(f); s != 200 {
			t.Fatalf("%s: status %d", f, s)
		}
	}
	rs, err := e.store.Active(t.Context(), "octo")
	if err != nil || len(rs) != 0 {
		t.Fatalf("active after completed-first = %v, %v; want none", rs, err)
	}
	if len(e.nudger.pools) != 0 {
		t.Fatalf("stale queued deliveries nudged the sweeper: %v", e.nudger.pools)
	}
}

func TestNoMatchLogsWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := []byte(strings.Replace(string(fixture(t, "workflow_job/queued.payload.json")), `"ubuntu-latest"`, `"gpu-a100"`, 1))
	resp := e.invoke(t, httpAPI(headersFor("workflow_job", body), body, false))
	if resp.StatusCode != 202 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var line map[string]any
	if err := json.Unmarshal(e.logs.Bytes(), &line); err != nil {
		t.Fatalf("want exactly one JSON log line, got %q: %v", e.logs.String(), err)
	}
	if line["repository"] != "Codertocat/Hello-World" || fmt.Sprint(line["labels"]) != "[gpu-a100]" ||
		!strings.Contains(fmt.Sprint(line["reason"]), "none has every label of [gpu-a100]") {
		t.Fatalf("log line %v lacks repository, labels or why", line)
	}
}

func TestNudgeFailureDoesNotFailTheDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.nudger.err = errors.New("lambda throttled")
	body := fixture(t, "workflow_job/queued.payload.json")
	resp := e.invoke(t, httpAPI(headersFor("workflow_job", body), body, false))
	if resp.StatusCode != 200 || len(e.nudger.pools) != 1 {
		t.Fatalf("status %d, nudges %v; want 200 after one failed nudge", resp.StatusCode, e.nudger.pools)
	}
	if !strings.Contains(e.logs.String(), "failed: lambda throttled") {
		t.Fatalf("nudge failure not logged: %s", e.logs.String())
	}
}

// TestDynamoDBDown points a real DynamoDB client at a port where nothing listens:
// after the SDK's retries the delivery must answer 503 so GitHub can redeliver.
func TestDynamoDBDown(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1"),
		Credentials:      credentials.NewStaticCredentialsProvider("local", "local", ""),
		RetryMaxAttempts: 2,
	})
	logs := &syncBuffer{}
	h := webhook.New([]byte(secret), cfg, reservation.New(db, "t", clocktesting.NewFakePassiveClock(fixtureTime)),
		webhook.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	body := fixture(t, "workflow_job/queued.payload.json")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := h.Handle(ctx, events.APIGatewayV2HTTPRequest{Headers: lower(headersFor("workflow_job", body)), Body: string(body)})
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("response %d %q, err %v; want 503", resp.StatusCode, resp.Body, err)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Fatalf("a failed write must be logged as an error: %s", logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}
