package wiring_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
	"github.com/runnerscaler/runnerscaler/internal/webhook/wiring"
)

const secretARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:webhook"

// secrets is a Secrets Manager holding values by ARN; it records what was read.
type secrets struct {
	values map[string]string
	err    error
	read   []string
}

func (s *secrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	s.read = append(s.read, aws.ToString(in.SecretId))
	if s.err != nil {
		return nil, s.err
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(s.values[aws.ToString(in.SecretId)])}, nil
}

// table is a DynamoDB whose writes succeed; it records the tables and the
// sort keys written.
type table struct {
	reservation.API
	written, keys []string
}

func (d *table) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	d.written = append(d.written, aws.ToString(in.TableName))
	if sk, ok := in.Key["SK"].(*types.AttributeValueMemberS); ok {
		d.keys = append(d.keys, sk.Value)
	}
	return &dynamodb.UpdateItemOutput{}, nil
}

// GetItem finds nothing: a queued too old to reserve looks for a job held for
// an approval, which the fake table never has.
func (d *table) GetItem(_ context.Context, _ *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

// invoker is a Lambda that accepts every asynchronous invocation; it records the functions invoked.
type invoker struct{ invoked []string }

func (l *invoker) Invoke(_ context.Context, in *awslambda.InvokeInput, _ ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error) {
	l.invoked = append(l.invoked, aws.ToString(in.FunctionName))
	return &awslambda.InvokeOutput{StatusCode: 202}, nil
}

// fakes are one test's clients, and the configurations Connect was called with.
type fakes struct {
	secrets   *secrets
	table     *table
	lambda    *invoker
	connected []webhook.Config
}

func newFakes() *fakes {
	return &fakes{secrets: &secrets{values: map[string]string{secretARN: "local-webhook-secret"}}, table: &table{}, lambda: &invoker{}}
}

func (f *fakes) connect(_ context.Context, cfg webhook.Config) (wiring.Clients, error) {
	f.connected = append(f.connected, cfg)
	return wiring.Clients{Secrets: f.secrets, DynamoDB: f.table, Lambda: f.lambda}, nil
}

// environ is the deployed function's environment (template.yaml), with the
// local stack's pools file.
func environ() map[string]string {
	return map[string]string{"TABLE_NAME": "runnerscaler-table", "POOLS_CONFIG": "../../../local/pools.yaml",
		"WEBHOOK_SECRET_ARN": secretARN, "SWEEPER_FUNCTION_NAME": "runnerscaler-sweeper"}
}

// eventTime is a minute after the job of local/events/webhook-queued.json was
// created: the store's clock, so that the event's queued is not too old.
var eventTime = time.Date(2021, 9, 13, 2, 22, 13, 0, time.UTC)

func build(t *testing.T, vars map[string]string, f *fakes) (*webhook.Handler, error) {
	t.Helper()
	return wiring.FromEnv(t.Context(), wiring.Env{Getenv: func(k string) string { return vars[k] }, Connect: f.connect,
		Clock: clocktesting.NewFakePassiveClock(eventTime)})
}

// deliver hands the handler local/events/<file>, signed with the local secret.
func deliver(t *testing.T, h *webhook.Handler, file string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	raw, err := os.ReadFile("../../../local/events/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Body    string            `json:"body"`
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	resp, err := h.Handle(t.Context(), events.APIGatewayV2HTTPRequest{Headers: ev.Headers, Body: ev.Body})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestFromEnvBuildsTheDeployedHandler: the handler verifies deliveries with the
// secret read from Secrets Manager under WEBHOOK_SECRET_ARN, records a queued
// job in TABLE_NAME, and nudges SWEEPER_FUNCTION_NAME; Connect gets the
// configuration, DynamoDB endpoint included.
func TestFromEnvBuildsTheDeployedHandler(t *testing.T) {
	t.Parallel()
	f := newFakes()
	vars := environ()
	vars["DYNAMODB_ENDPOINT"] = "http://127.0.0.1:8000"
	h, err := build(t, vars, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.connected) != 1 || f.connected[0].DynamoDBEndpoint != "http://127.0.0.1:8000" {
		t.Fatalf("connected with %+v, want once with the DynamoDB endpoint", f.connected)
	}
	if len(f.secrets.read) != 1 || f.secrets.read[0] != secretARN {
		t.Fatalf("secrets read %v, want %s once", f.secrets.read, secretARN)
	}
	if resp := deliver(t, h, "webhook-queued.json"); resp.StatusCode != 200 {
		t.Fatalf("queued delivery: %d %q, want 200", resp.StatusCode, resp.Body)
	}
	if len(f.table.written) != 1 || f.table.written[0] != "runnerscaler-table" {
		t.Fatalf("tables written %v, want runnerscaler-table once", f.table.written)
	}
	if len(f.lambda.invoked) != 1 || f.lambda.invoked[0] != "runnerscaler-sweeper" {
		t.Fatalf("functions nudged %v, want runnerscaler-sweeper once", f.lambda.invoked)
	}
}

// TestFromEnvKeepsQueueWaits: the deployed handler keeps the wait of a job
// its in_progress starts, in the same table, in the minute's queue-wait item.
func TestFromEnvKeepsQueueWaits(t *testing.T) {
	t.Parallel()
	f := newFakes()
	h, err := build(t, environ(), f)
	if err != nil {
		t.Fatal(err)
	}
	if resp := deliver(t, h, "webhook-in-progress.json"); resp.StatusCode != 200 {
		t.Fatalf("in_progress delivery: %d %q, want 200", resp.StatusCode, resp.Body)
	}
	want := []string{"JOB#289782451", "WAIT#2021-09-13T02:22Z"}
	if !slices.Equal(f.table.keys, want) || !slices.Equal(f.table.written, []string{"runnerscaler-table", "runnerscaler-table"}) {
		t.Fatalf("wrote %v to %v, want %v to runnerscaler-table", f.table.keys, f.table.written, want)
	}
}

// TestFromEnvVerifiesWithTheSecretItRead: a delivery signed with the local
// secret is refused when Secrets Manager holds another one.
func TestFromEnvVerifiesWithTheSecretItRead(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.secrets.values[secretARN] = "another secret"
	h, err := build(t, environ(), f)
	if err != nil {
		t.Fatal(err)
	}
	if resp := deliver(t, h, "webhook-ping.json"); resp.StatusCode != 401 {
		t.Fatalf("ping signed with another secret: %d %q, want 401", resp.StatusCode, resp.Body)
	}
	f.secrets.values[secretARN] = "local-webhook-secret"
	if h, err = build(t, environ(), f); err != nil {
		t.Fatal(err)
	}
	if resp := deliver(t, h, "webhook-ping.json"); resp.StatusCode != 200 {
		t.Fatalf("ping signed with the secret: %d %q, want 200", resp.StatusCode, resp.Body)
	}
}

// TestFromEnvWithoutNudges: without SWEEPER_FUNCTION_NAME the job is recorded
// and nobody is nudged.
func TestFromEnvWithoutNudges(t *testing.T) {
	t.Parallel()
	f := newFakes()
	vars := environ()
	delete(vars, "SWEEPER_FUNCTION_NAME")
	h, err := build(t, vars, f)
	if err != nil {
		t.Fatal(err)
	}
	if resp := deliver(t, h, "webhook-queued.json"); resp.StatusCode != 200 || len(f.table.written) != 1 {
		t.Fatalf("queued delivery: %d %q, %d writes; want 200 and one write", resp.StatusCode, resp.Body, len(f.table.written))
	}
	if len(f.lambda.invoked) != 0 {
		t.Fatalf("nudged %v without SWEEPER_FUNCTION_NAME", f.lambda.invoked)
	}
}

// TestFromEnvRealClockByDefault: without Env.Clock the store runs on real
// time, by which the shipped queued event's job (created in 2021) is too old
// to reserve anything.
func TestFromEnvRealClockByDefault(t *testing.T) {
	t.Parallel()
	f, vars := newFakes(), environ()
	h, err := wiring.FromEnv(t.Context(), wiring.Env{Getenv: func(k string) string { return vars[k] }, Connect: f.connect})
	if err != nil {
		t.Fatal(err)
	}
	if resp := deliver(t, h, "webhook-queued.json"); resp.StatusCode != 200 || !strings.Contains(resp.Body, "stale: job created") ||
		len(f.table.written) != 0 || len(f.lambda.invoked) != 0 {
		t.Fatalf("queued delivery: %d %q, %d writes, nudged %v; want 200 stale and nothing done",
			resp.StatusCode, resp.Body, len(f.table.written), f.lambda.invoked)
	}
}

// TestFromEnvFailures: a missing or invalid setting fails before any client
// is built, naming the variable; a pools file that does not load names the
// file; a secret that cannot be read, or is empty, names its ARN.
func TestFromEnvFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		edit    func(vars map[string]string, f *fakes)
		want    string
		connect bool // Connect was called
	}{
		{"no table", func(v map[string]string, _ *fakes) { delete(v, "TABLE_NAME") }, "TABLE_NAME", false},
		{"no pools file", func(v map[string]string, _ *fakes) { delete(v, "POOLS_CONFIG") }, "POOLS_CONFIG", false},
		{"no secret", func(v map[string]string, _ *fakes) { delete(v, "WEBHOOK_SECRET_ARN") }, "WEBHOOK_SECRET_ARN", false},
		{"bad log level", func(v map[string]string, _ *fakes) { v["AWS_LAMBDA_LOG_LEVEL"] = "LOUD" }, `"LOUD"`, false},
		{"pools file missing", func(v map[string]string, _ *fakes) { v["POOLS_CONFIG"] = "missing.yaml" }, "missing.yaml", false},
		{"secret unreadable", func(_ map[string]string, f *fakes) { f.secrets.err = errors.New("AccessDenied") }, secretARN, true},
		{"secret empty", func(_ map[string]string, f *fakes) { f.secrets.values[secretARN] = "" }, secretARN, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, vars := newFakes(), environ()
			tc.edit(vars, f)
			h, err := build(t, vars, f)
			if err == nil || h != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("FromEnv: %v, %v; want an error naming %s", h, err, tc.want)
			}
			if called := len(f.connected) > 0; called != tc.connect {
				t.Fatalf("Connect called: %v, want %v", called, tc.connect)
			}
		})
	}
}
