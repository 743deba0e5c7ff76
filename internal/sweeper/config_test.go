package sweeper_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	base := map[string]string{"TABLE_NAME": "t", "POOLS_CONFIG": "p", "KUBECONFIG": "k", "GITHUB_APP_ID": "1",
		"GITHUB_APP_INSTALLATION_ID": "2", "GITHUB_APP_PRIVATE_KEY_ARN": "arn:aws:secretsmanager:x"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		env  map[string]string
		want string
	}{
		{with(), ""},
		{with("TABLE_NAME", ""), "TABLE_NAME is required"},
		{with("POOLS_CONFIG", ""), "POOLS_CONFIG is required"},
		{with("LEASE_SECONDS", "2"), `LEASE_SECONDS "2" must be`},
		{with("SWEEP_PARALLELISM", "x"), `SWEEP_PARALLELISM "x" must be`},
		{with("IDLE_CONFIRMATION_SECONDS", "0"), `IDLE_CONFIRMATION_SECONDS "0" must be`},
		{with("IDLE_CONFIRMATION_SECONDS", "90s"), `IDLE_CONFIRMATION_SECONDS "90s" must be`},
		{with("RUNNER_LIST_MAX_AGE_SECONDS", "61"), `RUNNER_LIST_MAX_AGE_SECONDS "61" must be`},
		{with("RUNNER_LIST_MAX_AGE_SECONDS", "-1"), `RUNNER_LIST_MAX_AGE_SECONDS "-1" must be`},
		{with("DYNAMODB_ENDPOINT", "db:8000"), `DYNAMODB_ENDPOINT "db:8000" is not a URL`},
		{with("KUBECONFIG", ""), "set exactly one of EKS_CLUSTER_NAME and KUBECONFIG"},
		{with("EKS_CLUSTER_NAME", "c"), "set exactly one of EKS_CLUSTER_NAME and KUBECONFIG"},
		{with("KUBECONFIG", "", "EKS_CLUSTER_NAME", "c", "EKS_ENDPOINT", "https://x"), "set both EKS_ENDPOINT and EKS_CA"},
		{with("KUBECONFIG", "", "EKS_CLUSTER_NAME", "c"), ""},
		{with("GITHUB_APP_ID", "abc"), `GITHUB_APP_ID "abc" must be a positive number`},
		{with("GITHUB_TOKEN_ARN", "arn:aws:secretsmanager:y"), ""}, // the App, and a PAT for enterprise pools
		{with("GITHUB_TOKEN_ARN", "arn:y", "GITHUB_TOKEN", "ghp_x"), "at most one of GITHUB_TOKEN_ARN and GITHUB_TOKEN"},
		{with("GITHUB_APP_PRIVATE_KEY", "pem"), "exactly one of GITHUB_APP_PRIVATE_KEY_ARN and GITHUB_APP_PRIVATE_KEY"},
		{with("GITHUB_APP_INSTALLATION_ID", ""), ""}, // looked up per pool
		{with("GITHUB_APP_ID", ""), "GITHUB_APP_ID is required"},
		{with("GITHUB_APP_ID", "", "GITHUB_APP_INSTALLATION_ID", "", "GITHUB_APP_PRIVATE_KEY_ARN", ""), "configure a GitHub App"},
		{with("GITHUB_APP_ID", "", "GITHUB_APP_INSTALLATION_ID", "", "GITHUB_APP_PRIVATE_KEY_ARN", "", "GITHUB_TOKEN", "ghp_x"), ""},
	}
	for _, tc := range cases {
		c, err := sweeper.ConfigFromEnv(func(k string) string { return tc.env[k] })
		if tc.want == "" && (err != nil || c.Lease != 30*time.Second || c.Parallelism != 4) ||
			tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("env %v: config %+v, error %v; want %q", tc.env, c, err, tc.want)
		}
	}
}

// TestIdleConfirmationFromEnv: IDLE_CONFIRMATION_SECONDS sets the idle
// confirmation; unset, it stays zero (the reconciler's 90 s default).
func TestIdleConfirmationFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TABLE_NAME": "t", "POOLS_CONFIG": "p", "KUBECONFIG": "k", "GITHUB_TOKEN": "ghp_x"}
	c, err := sweeper.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || c.IdleConfirmation != 0 {
		t.Fatalf("unset: %v, %v; want 0", c.IdleConfirmation, err)
	}
	env["IDLE_CONFIRMATION_SECONDS"] = "120"
	if c, err = sweeper.ConfigFromEnv(func(k string) string { return env[k] }); err != nil || c.IdleConfirmation != 2*time.Minute {
		t.Fatalf("120: %v, %v; want 2m", c.IdleConfirmation, err)
	}
}

// TestRunnerListMaxAgeFromEnv: RUNNER_LIST_MAX_AGE_SECONDS sets how long
// pools share a runner list (default 10 s); 0 turns sharing off.
func TestRunnerListMaxAgeFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TABLE_NAME": "t", "POOLS_CONFIG": "p", "KUBECONFIG": "k", "GITHUB_TOKEN": "ghp_x"}
	for v, want := range map[string]time.Duration{"": 10 * time.Second, "0": 0, "30": 30 * time.Second} {
		env["RUNNER_LIST_MAX_AGE_SECONDS"] = v
		if c, err := sweeper.ConfigFromEnv(func(k string) string { return env[k] }); err != nil || c.RunnerListMaxAge != want {
			t.Errorf("%q: %v, %v; want %v", v, c.RunnerListMaxAge, err, want)
		}
	}
}

func TestRunnerURL(t *testing.T) {
	t.Parallel()
	for api, want := range map[string]string{
		"https://api.github.com/": "https://github.com", "https://ghes.example.com/api/v3/": "https://ghes.example.com",
	} {
		if got := sweeper.RunnerURL(api); got != want {
			t.Errorf("RunnerURL(%q) = %q, want %q", api, got, want)
		}
	}
}

// TestConfigPrintsNoSecret: the App's private key and the token appear in no
// rendering of a Config — slog's JSON and text handlers, fmt's verbs, JSON.
func TestConfigPrintsNoSecret(t *testing.T) {
	t.Parallel()
	const key, token = "-----BEGIN RSA PRIVATE KEY-----\nMIIEsecretkeybytes\n-----END RSA PRIVATE KEY-----", "ghp_secrettokenbytes"
	env := map[string]string{"TABLE_NAME": "t", "POOLS_CONFIG": "p", "KUBECONFIG": "k", "GITHUB_APP_ID": "1",
		"GITHUB_APP_PRIVATE_KEY": key, "GITHUB_TOKEN": token}
	c, err := sweeper.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{c, &c} {
		for name, out := range renderings(t, v) {
			if strings.Contains(out, "secretkeybytes") || strings.Contains(out, "secrettokenbytes") {
				t.Errorf("%s of a %T shows a secret: %s", name, v, out)
			}
			if strings.Count(out, "[REDACTED]") != 2 {
				t.Errorf("%s of a %T does not show both secrets redacted: %s", name, v, out)
			}
		}
	}
}

// renderings are v as every usual printer renders it, by printer.
func renderings(t *testing.T, v any) map[string]string {
	t.Helper()
	var js, text bytes.Buffer
	slog.New(slog.NewJSONHandler(&js, nil)).Info("config", "config", v)
	slog.New(slog.NewTextHandler(&text, nil)).Info("config", "config", v)
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"slog JSON": js.String(), "slog text": text.String(), "json.Marshal": string(raw),
		"%v": fmt.Sprintf("%v", v), "%+v": fmt.Sprintf("%+v", v), "%#v": fmt.Sprintf("%#v", v), "%s": fmt.Sprintf("%s", v)}
}
