package pool_test

import (
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

const valid = `
pools:
  - name: a
    organization: org
    maxReplicas: 3
    kubernetes: {namespace: ns, image: runner:1}
`

func TestExampleFileLoads(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Load("../../infra/pools.example.yaml")
	if err != nil {
		t.Fatalf("example file: %v", err)
	}
	p := cfg.Pool("linux-x64")
	if p == nil || cfg.Pool("app-arm64") == nil {
		t.Fatalf("example pools not found: %+v", cfg.Pools)
	}
	amount, dur := p.Trigger()
	if amount != 1 || dur != 30*time.Minute || p.ScaleDownDelay() != 300*time.Second || !p.IsEphemeral() || p.Max() != 20 {
		t.Errorf("linux-x64 = amount %d duration %s delay %s ephemeral %v max %d", amount, dur, p.ScaleDownDelay(), p.IsEphemeral(), p.Max())
	}
	if got := p.ScheduledOverrides[0].RecurrenceRule.Frequency; got != "Weekly" {
		t.Errorf("recurrence frequency = %q", got)
	}
	if p.Kubernetes.Template.Kind == 0 {
		t.Error("template was not kept")
	}
	if cfg.Pool("app-arm64").IsEphemeral() {
		t.Error("app-arm64 declares ephemeral: false")
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Pool("a")
	amount, dur := p.Trigger()
	if amount != 1 || dur != pool.DefaultTriggerDuration || p.ScaleDownDelay() != pool.DefaultScaleDownDelay ||
		!p.IsEphemeral() || p.Arch != "x64" || p.MinReplicas != 0 || p.Reruns() != pool.DefaultRerunsPerRun {
		t.Errorf("defaults: amount %d duration %s delay %s ephemeral %v arch %q", amount, dur, p.ScaleDownDelay(), p.IsEphemeral(), p.Arch)
	}
}

// Each invalid file is the valid one with one change; the error must name the pool
// and the field's path.
func TestValidationNamesTheField(t *testing.T) {
	t.Parallel()
	base := "  - name: a\n    organization: org\n    maxReplicas: 3\n    kubernetes: {namespace: ns, image: runner:1}\n"
	cases := []struct {
		name, file, want string
	}{
		{"unknown field", "pools:\n" + base + "    maxReplica: 3\n", "pools[0].maxReplica: line 6: unknown field"},
		{"unknown nested field", "pools:\n" + base + "    scaleUpTriggers: [{amount: 1, duraton: 5m}]\n", "pools[0].scaleUpTriggers[0].duraton: line 6: unknown field"},
		{"unknown top-level field", "pool:\n" + base, "pool: line 1: unknown field"},
		{"wrong type", "pools:\n" + strings.Replace(base, "maxReplicas: 3", "maxReplicas: three", 1), "pools[0].maxReplicas: line 4: cannot unmarshal"},
		{"duplicate name", "pools:\n" + base + base, "pools[1] (a): name: duplicate of pools[0]"},
		{"min > max", "pools:\n" + base + "    minReplicas: 4\n", "pools[0] (a): maxReplicas: 3 must be >= 1 and >= minReplicas (4)"},
		{"max missing", "pools:\n" + strings.Replace(base, "    maxReplicas: 3\n", "", 1), "pools[0] (a): maxReplicas: required"},
		{"bad duration", "pools:\n" + base + "    scaleUpTriggers: [{duration: 5 minutes}]\n", `pools[0].scaleUpTriggers[0].duration: line 6: "5 minutes" is not a duration`},
		{"short duration", "pools:\n" + base + "    scaleUpTriggers: [{duration: 5s}]\n", "pools[0] (a): scaleUpTriggers[0].duration: 5s must be at least 1m"},
		{"two scopes", "pools:\n" + base + "    repository: org/app\n", "pools[0] (a): enterprise/organization/repository: exactly one"},
		{"no scope", "pools:\n" + strings.Replace(base, "    organization: org\n", "", 1), "pools[0] (a): enterprise/organization/repository: exactly one"},
		{"bad repository", "pools:\n" + strings.Replace(base, "organization: org", "repository: app", 1), `repository "app": want owner/name`},
		{"repository name outside GitHub's set", "pools:\n" + strings.Replace(base, "organization: org", `repository: "victim/repo?"`, 1),
			`pools[0] (a): enterprise/organization/repository: repository name "repo?"`},
		{"organization outside GitHub's set", "pools:\n" + strings.Replace(base, "organization: org", `organization: "org/../x"`, 1),
			`pools[0] (a): enterprise/organization/repository: organization "org/../x"`},
		{"enterprise outside GitHub's set", "pools:\n" + strings.Replace(base, "organization: org", `enterprise: "corp?x"`, 1),
			`pools[0] (a): enterprise/organization/repository: enterprise "corp?x"`},
		{"bad name", "pools:\n" + strings.Replace(base, "name: a", "name: Linux_X64", 1), `pools[0] (Linux_X64): name: "Linux_X64" must be a DNS-1123 label`},
		{"bad namespace", "pools:\n" + strings.Replace(base, "namespace: ns", "namespace: NS", 1), `pools[0] (a): kubernetes.namespace: "NS"`},
		{"bad frequency", "pools:\n" + base + "    scheduledOverrides: [{startTime: \"2026-01-01T00:00:00Z\", endTime: \"2026-01-01T01:00:00Z\", minReplicas: 1, recurrenceRule: {frequency: Hourly}}]\n",
			`pools[0] (a): scheduledOverrides[0].recurrenceRule.frequency: "Hourly"`},
		{"bad time", "pools:\n" + base + "    scheduledOverrides: [{startTime: tomorrow, endTime: \"2026-01-01T01:00:00Z\", minReplicas: 1}]\n",
			`pools[0].scheduledOverrides[0].startTime: line 6: "tomorrow" is not an RFC 3339 time`},
		{"end before start", "pools:\n" + base + "    scheduledOverrides: [{startTime: \"2026-01-01T02:00:00Z\", endTime: \"2026-01-01T01:00:00Z\", minReplicas: 1}]\n",
			"pools[0] (a): scheduledOverrides[0].endTime: 2026-01-01T01:00:00Z must be after startTime"},
		{"override above max", "pools:\n" + base + "    scheduledOverrides: [{startTime: \"2026-01-01T00:00:00Z\", endTime: \"2026-01-01T01:00:00Z\", minReplicas: 9}]\n",
			"pools[0] (a): scheduledOverrides[0].minReplicas: required, between 0 and maxReplicas (3)"},
		{"bad arch", "pools:\n" + base + "    arch: amd64\n", `pools[0] (a): arch: "amd64" must be one of`},
		{"negative reruns", "pools:\n" + base + "    rerunsPerRun: -1\n", "pools[0] (a): rerunsPerRun: -1 must be between 0 (no re-runs) and 50 (GitHub's limit)"},
		{"too many reruns", "pools:\n" + base + "    rerunsPerRun: 51\n", "pools[0] (a): rerunsPerRun: 51 must be between 0"},
		{"unknown registration", "pools:\n" + base + "    registration: pat\n", `pools[0] (a): registration: "pat" must be "jit" or "token"`},
		{"jit for a persistent pool", "pools:\n" + base + "    ephemeral: false\n    registration: jit\n", `pools[0] (a): registration: "jit" needs ephemeral runners`},
		{"bad runner version", "pools:\n" + base + "    runnerVersion: latest\n", `pools[0] (a): runnerVersion: "latest" must be an actions/runner release number`},
		{"comma label", "pools:\n" + base + "    labels: [\"a,b\"]\n", `pools[0] (a): labels[0]: "a,b"`},
		{"every bad label", "pools:\n" + base + "    labels: [\"\", \"a,b\"]\n", `pools[0] (a): labels[1]: "a,b"`},
		{"label with a space", "pools:\n" + base + "    labels: [\"gpu large\"]\n", `pools[0] (a): labels[0]: "gpu large" must contain no space`},
		{"self-hosted label", "pools:\n" + base + "    labels: [gpu, Self-Hosted]\n", `pools[0] (a): labels[1]: "Self-Hosted" is implied`},
		{"two triggers", "pools:\n" + base + "    scaleUpTriggers: [{amount: 1}, {amount: 2}]\n", "pools[0] (a): scaleUpTriggers: at most one"},
		{"docker twice", "pools:\n" + strings.Replace(base, "image: runner:1}", "image: runner:1, dockerEnabled: true, dockerdWithinRunnerContainer: true}", 1), "mutually exclusive"},
		{"no pools", "pools: []\n", "pools: at least one pool is required"},
		{"empty", "", "empty file"},
		{"field twice", "pools:\n" + base + "    maxReplicas: 4\n", "pools[0].maxReplicas: line 6: field given twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := pool.Parse([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// Ephemeral pools register each runner with a JIT config unless they ask for
// the registration token; persistent pools always use the token.
func TestUsesToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		extra string
		want  bool
	}{
		{"", false},
		{"    registration: jit\n", false},
		{"    registration: token\n", true},
		{"    ephemeral: false\n", true},
		{"    ephemeral: false\n    registration: token\n", true},
	} {
		cfg, err := pool.Parse([]byte(valid + tc.extra))
		if err != nil {
			t.Fatalf("%q: %v", tc.extra, err)
		}
		if got := cfg.Pool("a").UsesToken(); got != tc.want {
			t.Errorf("%q: UsesToken() = %v, want %v", tc.extra, got, tc.want)
		}
	}
}

// TestParseReportsEveryProblem: Parse goes on past the first error, so that a
// file is fixed in one round: each pool is checked, and each problem is an
// error of its own with its position.
func TestParseReportsEveryProblem(t *testing.T) {
	t.Parallel()
	base := "  - name: a\n    organization: org\n    maxReplicas: 3\n    kubernetes: {namespace: ns, image: runner:1}\n"
	file := "pools:\n" + base + "    arch: amd64\n" + strings.ReplaceAll(base, "name: a", "name: b") + "    minReplicas: -1\n"
	_, err := pool.Parse([]byte(file))
	problems := pool.Problems(err)
	if len(problems) != 2 {
		t.Fatalf("problems = %v, want two", err)
	}
	if p := problems[0]; p.Line != 6 || p.Column != 5 || !strings.HasPrefix(p.Error(), `pools[0] (a): arch: "amd64"`) {
		t.Errorf("first problem at %d:%d: %v", p.Line, p.Column, p)
	}
	if p := problems[1]; p.Line != 11 || p.Path() != "pools[1].minReplicas" {
		t.Errorf("second problem at line %d, path %s: %v", p.Line, p.Path(), p)
	}
}
