package webhook_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/webhook"
)

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	good := map[string]string{"TABLE_NAME": "t", "POOLS_CONFIG": "/p.yaml", "WEBHOOK_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:1:secret:s"}
	cases := []struct {
		name   string
		change map[string]string
		want   string
	}{
		{"valid", nil, ""},
		{"no table", map[string]string{"TABLE_NAME": ""}, "TABLE_NAME is required"},
		{"no pools", map[string]string{"POOLS_CONFIG": ""}, "POOLS_CONFIG is required"},
		{"no secret", map[string]string{"WEBHOOK_SECRET_ARN": ""}, "WEBHOOK_SECRET_ARN is required"},
		{"two secrets", map[string]string{"WEBHOOK_SECRET": "s3cr3t-value"}, "set only one of WEBHOOK_SECRET_ARN and WEBHOOK_SECRET"},
		{"secret not an ARN", map[string]string{"WEBHOOK_SECRET_ARN": "my-secret"}, `WEBHOOK_SECRET_ARN "my-secret" is not an ARN`},
		{"endpoint not a URL", map[string]string{"DYNAMODB_ENDPOINT": "localhost:8000"}, `DYNAMODB_ENDPOINT "localhost:8000" is not a URL`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range good {
				env[k] = v
			}
			for k, v := range tc.change {
				env[k] = v
			}
			_, err := webhook.ConfigFromEnv(func(k string) string { return env[k] })
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cr3t-value") {
				t.Fatalf("error leaks the secret: %v", err)
			}
		})
	}
}

func TestConfigLogValueRedactsSecret(t *testing.T) {
	t.Parallel()
	c := webhook.Config{TableName: "t", WebhookSecret: "s3cr3t-value"}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("cfg", "config", c)
	if strings.Contains(b.String(), "s3cr3t-value") || !strings.Contains(b.String(), "[REDACTED]") {
		t.Fatalf("log %q must redact the secret", b.String())
	}
}

// TestConfigPrintsNoSecret: no rendering of a Config — slog's JSON handler,
// fmt's verbs, JSON — shows the webhook secret.
func TestConfigPrintsNoSecret(t *testing.T) {
	t.Parallel()
	c := webhook.Config{TableName: "t", WebhookSecret: "s3cr3t-value"}
	for _, v := range []any{c, &c} {
		var js bytes.Buffer
		slog.New(slog.NewJSONHandler(&js, nil)).Info("cfg", "config", v)
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for name, out := range map[string]string{"slog JSON": js.String(), "json.Marshal": string(raw),
			"%v": fmt.Sprintf("%v", v), "%+v": fmt.Sprintf("%+v", v), "%#v": fmt.Sprintf("%#v", v)} {
			if strings.Contains(out, "s3cr3t-value") || !strings.Contains(out, "[REDACTED]") {
				t.Errorf("%s of a %T: %s; want the secret redacted", name, v, out)
			}
		}
	}
}
