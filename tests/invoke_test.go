package tests

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/invoke"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// build compiles a function's bootstrap for linux on this machine's architecture,
// with the flags of the Lambda build.
func build(t testing.TB, fn string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, "../functions/"+fn)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", fn, err, msg)
	}
	return out
}

func rie(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("bash", "../local/rie-build.sh").Output()
	if err != nil {
		t.Fatalf("building aws-lambda-rie: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func localEnv(t testing.TB, extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local", "DYNAMODB_ENDPOINT=" + testenv.DynamoDBEndpoint(t)}, extra...)
}

func start(t testing.TB, bootstrap string, env []string) *invoke.Emulator {
	t.Helper()
	e, err := invoke.Start(t.Context(), rie(t), bootstrap, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// TestWebhookBootstrapUnderEmulator: the real linux bootstrap, the shipped event
// files, the local dynalite — a signed queued delivery answers 200 and reserves.
// The shipped queued event's job was created in 2021, too long ago to reserve
// anything now (package reservation): it answers 200 stale, and the same event
// with its job created now, signed again, reserves.
func TestWebhookBootstrapUnderEmulator(t *testing.T) {
	t.Parallel()
	db, tableName := testenv.Table(t)
	pools, err := filepath.Abs("../local/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, build(t, "webhook"), localEnv(t, "TABLE_NAME="+tableName, "POOLS_CONFIG="+pools, "WEBHOOK_SECRET=local-webhook-secret"))
	shipped := map[string][]byte{}
	for _, file := range []string{"webhook-queued.json", "webhook-bad-signature.json"} {
		event, err := os.ReadFile("../local/events/" + file)
		if err != nil {
			t.Fatal(err)
		}
		shipped[file] = event
	}
	for _, c := range []struct {
		name   string
		event  []byte
		status int
		body   string
	}{
		{"webhook-queued.json", shipped["webhook-queued.json"], 200, "stale: job created 2021-09-13T02:21:13Z"},
		{"webhook-bad-signature.json", shipped["webhook-bad-signature.json"], 401, "does not match"},
		{"webhook-queued.json created now", createdNow(t, shipped["webhook-queued.json"], "local-webhook-secret"), 200, "applied"},
	} {
		out, err := e.Invoke(t.Context(), c.event)
		if err != nil {
			t.Fatal(err)
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != c.status || !strings.Contains(resp.Body, c.body) {
			t.Fatalf("%s: %s (%v), want status %d and %q\n%s", c.name, out, err, c.status, c.body, e.Logs())
		}
	}
	rs, err := reservation.New(db, tableName, clock.RealClock{}).Active(t.Context(), "octo")
	if err != nil || len(rs) != 1 || rs[0].JobID != 289782451 {
		t.Fatalf("reservations after the queued event: %+v, %v", rs, err)
	}
	if d, ok := e.InitDuration(); !ok || d <= 0 {
		t.Fatalf("no init duration in the emulator's report:\n%s", e.Logs())
	} else {
		t.Logf("webhook init duration under the emulator: %s", d)
	}
}

// createdNow is a webhook event (HTTP API shape) whose workflow_job was created
// now, signed again with secret.
func createdNow(t *testing.T, raw []byte, secret string) []byte {
	t.Helper()
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	var payload map[string]any
	if err := json.Unmarshal([]byte(ev.Body), &payload); err != nil {
		t.Fatal(err)
	}
	payload["workflow_job"].(map[string]any)["created_at"] = time.Now().UTC().Format(time.RFC3339)
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	ev.Body, ev.Headers["x-hub-signature-256"] = string(body), "sha256="+hex.EncodeToString(mac.Sum(nil))
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSweeperBootstrapUnderEmulator: the scheduled event file makes the real
// sweeper bootstrap create a runner's StatefulSet on the local kube-apiserver,
// with the App's installation looked up from the pool's organization (no
// installation id configured); a drain event through the nudge alias is
// refused; drain events through the drain alias then remove the runner.
func TestSweeperBootstrapUnderEmulator(t *testing.T) {
	t.Parallel()
	db, tableName := testenv.Table(t)
	kube, ns := testenv.Namespace(t)
	pools := filepath.Join(t.TempDir(), "pools.yaml")
	cfg := fmt.Sprintf("pools:\n  - name: octo\n    organization: Octocoders\n    labels: [ubuntu-latest]\n    maxReplicas: 3\n    kubernetes: {namespace: %s, image: runner:1}\n", ns)
	if err := os.WriteFile(pools, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	sim := githubsim.New(githubsim.Options{AppID: 3, AppKey: &key.PublicKey, Accounts: map[int64]string{41: "Octocoders"}})
	apispec.Verify(t, sim)
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	_, err = reservation.New(db, tableName, clock.RealClock{}).Record(t.Context(), reservation.Delivery{
		Pool: "octo", JobID: 1, State: reservation.Queued, Amount: 1, Duration: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := build(t, "sweeper")
	via := func(alias string) *invoke.Emulator {
		return start(t, bootstrap, localEnv(t, "TABLE_NAME="+tableName, "POOLS_CONFIG="+pools,
			"KUBECONFIG="+testenv.Kubeconfig(t), "GITHUB_URL="+srv.URL+"/", "GITHUB_APP_ID=3",
			"GITHUB_APP_PRIVATE_KEY="+string(keyPEM), invoke.FunctionNameEnv+"=runnerscaler-sweeper:"+alias))
	}
	e := via(sweepevent.NudgeAlias)
	event, err := os.ReadFile("../local/events/sweeper-scheduled.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Invoke(t.Context(), event)
	if err != nil || !strings.Contains(string(out), `"swept":["octo"]`) {
		t.Fatalf("sweeper answered %s, %v\n%s", out, err, e.Logs())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	list, err := kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("statefulsets after the scheduled sweep: %d, %v\n%s", len(list.Items), err, e.Logs())
	}
	if !strings.Contains(e.Logs(), `"_aws"`) {
		t.Fatalf("no CloudWatch EMF record in the sweeper's output:\n%s", e.Logs())
	}
	if d, ok := e.InitDuration(); ok {
		t.Logf("sweeper init duration under the emulator: %s", d)
	}
	if n := sim.RateRemaining(41); n == 5000 {
		t.Fatal("the organization's installation (41) made no call")
	}
	out, _ = e.Invoke(t.Context(), []byte(`{"drain":"start"}`))
	if !strings.Contains(string(out), sweeper.ErrNotDrainEntry.Error()) {
		t.Fatalf("a drain through the nudge alias answered %s, want a refusal\n%s", out, e.Logs())
	}
	e = via(sweepevent.DrainAlias)
	drained := false
	for i := 0; i < 50 && !drained; i++ {
		out, err = e.Invoke(t.Context(), []byte(`{"drain":"start"}`))
		if err != nil || !strings.Contains(string(out), `"draining":true`) {
			t.Fatalf("drain answered %s, %v\n%s", out, err, e.Logs())
		}
		drained = !strings.Contains(string(out), `"remaining"`)
		time.Sleep(200 * time.Millisecond)
	}
	list, err = kube.AppsV1().StatefulSets(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !drained || len(list.Items) != 0 || len(sim.Runners()) != 0 {
		t.Fatalf("after the drain: last answer %s, %d statefulsets, %d GitHub runners", out, len(list.Items), len(sim.Runners()))
	}
}

// TestSweeperRefusesAnEnterprisePoolWithoutAToken: GitHub Apps cannot manage
// enterprise runners, so a sweeper configured with an App only refuses to start
// when a pool is an enterprise's, naming the pool; with the PAT it gets past that.
func TestSweeperRefusesAnEnterprisePoolWithoutAToken(t *testing.T) {
	t.Parallel()
	pools := filepath.Join(t.TempDir(), "pools.yaml")
	cfg := "pools:\n  - name: corp-builds\n    enterprise: corp\n    maxReplicas: 3\n    kubernetes: {namespace: ns, image: runner:1}\n"
	if err := os.WriteFile(pools, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	bootstrap := build(t, "sweeper")
	run := func(extra ...string) string {
		cmd := exec.Command(bootstrap)
		cmd.Env = localEnv(t, append([]string{"TABLE_NAME=t", "POOLS_CONFIG=" + pools, "KUBECONFIG=" + testenv.Kubeconfig(t),
			"GITHUB_URL=http://127.0.0.1:1/", "GITHUB_APP_ID=3", "GITHUB_APP_PRIVATE_KEY=" + string(keyPEM)}, extra...)...)
		out, _ := cmd.CombinedOutput() // without the Lambda runtime it fails either way
		return string(out)
	}
	const refusal = "pool corp-builds: enterprise/corp: GitHub Apps cannot manage enterprise runners"
	if out := run(); !strings.Contains(out, refusal) || strings.Contains(out, string(keyPEM[40:80])) {
		t.Fatalf("without a token the sweeper said:\n%s\nwant %q (and never the key)", out, refusal)
	}
	if out := run("GITHUB_TOKEN=ghp_corp"); !strings.Contains(out, "sweeper ready") || strings.Contains(out, "ghp_corp") {
		t.Fatalf("with a token the sweeper said:\n%s", out)
	}
}
