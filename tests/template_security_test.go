package tests

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
	"github.com/runnerscaler/runnerscaler/internal/table"
)

// webhookStatements are the statements of the webhook role's inline policies.
func webhookStatements(t *testing.T) []map[string]any {
	t.Helper()
	fn, err := openTemplate(t).GetServerlessFunctionWithName("WebhookFunction")
	if err != nil {
		t.Fatal(err)
	}
	if fn.Policies == nil || fn.Policies.IAMPolicyDocumentArray == nil {
		t.Fatal("WebhookFunction: no inline policy documents")
	}
	var out []map[string]any
	for _, doc := range *fn.Policies.IAMPolicyDocumentArray {
		for _, raw := range doc.Statement {
			out = append(out, raw.(map[string]any))
		}
	}
	return out
}

// actionsWithPrefix: the statement names an action of that service ("dynamodb:").
func actionsWithPrefix(st map[string]any, prefix string) bool {
	actions, _ := st["Action"].([]any)
	return slices.ContainsFunc(actions, func(a any) bool { return strings.HasPrefix(fmt.Sprint(a), prefix) })
}

// iamLike is IAM's StringLike: * matches any run of characters, ? any one.
func iamLike(pattern, s string) bool {
	re := regexp.QuoteMeta(pattern)
	re = strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(re)
	return regexp.MustCompile("^" + re + "$").MatchString(s)
}

// TestWebhookKeepsToItsPartitions: every table statement of the webhook's role
// allows only items whose partition key is one the webhook uses — it writes
// jobs' reservations and re-run candidates, the jobs runners took and
// unrouted jobs, and only reads the runner groups' access and the roster — so
// the role cannot write what the sweeper decides by (its leases and statuses,
// the workflow runs' re-run budgets and calls, its roster, the deaths it saw),
// the drain mark nor the deployment's items.
func TestWebhookKeepsToItsPartitions(t *testing.T) {
	t.Parallel()
	var writes, reads int
	for _, st := range webhookStatements(t) {
		if !actionsWithPrefix(st, "dynamodb:") {
			continue
		}
		cond, _ := st["Condition"].(map[string]any)
		like, _ := cond["ForAllValues:StringLike"].(map[string]any)
		patterns, _ := like["dynamodb:LeadingKeys"].([]any)
		if st["Effect"] != "Allow" || len(cond) != 1 || len(like) != 1 || len(patterns) == 0 {
			t.Errorf("webhook table statement %v: want an Allow limited by ForAllValues:StringLike on dynamodb:LeadingKeys", st)
			continue
		}
		matches := func(pk string) bool {
			return slices.ContainsFunc(patterns, func(p any) bool { return iamLike(fmt.Sprint(p), pk) })
		}
		want := []string{table.PoolPK("linux-x64"), table.RunnerPK("linux-x64-bcdfg-0"), table.UnroutedPK}
		if actions, _ := st["Action"].([]any); fmt.Sprint(actions) == "[dynamodb:GetItem]" {
			reads++
			want = []string{table.GroupAccessPK, table.RosterPK("linux-x64")}
			for _, pk := range []string{table.PoolPK("linux-x64"), table.RunnerPK("linux-x64-bcdfg-0"), table.UnroutedPK} {
				if matches(pk) {
					t.Errorf("the webhook may read partition %s (patterns %v): it reads the groups' access and the roster only", pk, patterns)
				}
			}
		} else {
			writes++
			for _, pk := range []string{table.GroupAccessPK, table.SweepPK("linux-x64"), table.RosterPK("linux-x64"),
				table.DeathsPK("linux-x64-bcdfg-0"), table.RunPK("acme/app", 90)} {
				if matches(pk) {
					t.Errorf("the webhook may write partition %s (patterns %v): the sweeper's", pk, patterns)
				}
			}
		}
		for _, pk := range want {
			if !matches(pk) {
				t.Errorf("statement %v does not cover partition %s (patterns %v): the webhook uses it", st["Action"], pk, patterns)
			}
		}
		for _, pk := range []string{table.DrainPK, table.DeploymentPK} {
			if matches(pk) {
				t.Errorf("the webhook may use partition %s (patterns %v): it is the sweeper's or the teardown's", pk, patterns)
			}
		}
	}
	if writes == 0 || reads == 0 {
		t.Fatalf("the webhook's role has %d writing and %d reading table statements: it could not record deliveries, or route past restricted groups", writes, reads)
	}
}

// TestOnlyTheDrainAliasDrains: the sweeper has a nudge and a drain alias on its
// latest code; the webhook nudges through the nudge alias and may invoke
// nothing else — not the function unqualified, not the drain alias; nudges
// through the alias keep the function's asynchronous bounds; the operator gets
// the drain alias's ARN.
func TestOnlyTheDrainAliasDrains(t *testing.T) {
	t.Parallel()
	tmpl := openTemplate(t)
	for name, alias := range map[string]string{"SweeperNudgeAlias": sweepevent.NudgeAlias, "SweeperDrainAlias": sweepevent.DrainAlias} {
		a, err := tmpl.GetLambdaAliasWithName(name)
		if err != nil {
			t.Fatal(err)
		}
		if a.Name != alias || a.FunctionName != "REF:SweeperFunction" || a.FunctionVersion != "$LATEST" {
			t.Errorf("%s is %q on %s version %s, want %q on SweeperFunction $LATEST", name, a.Name, a.FunctionName, a.FunctionVersion, alias)
		}
	}
	var invoke []string
	for _, st := range webhookStatements(t) {
		res := fmt.Sprint(st["Resource"])
		if strings.Contains(res, "SweeperFunction") || strings.Contains(res, "SweeperDrainAlias") {
			t.Errorf("webhook statement %v names the sweeper function or its drain alias", st)
		}
		if actionsWithPrefix(st, "lambda:") {
			invoke = append(invoke, res)
		}
	}
	if !slices.Equal(invoke, []string{"REF:SweeperNudgeAlias"}) {
		t.Errorf("the webhook may invoke %v, want the nudge alias only", invoke)
	}
	wh, _ := tmpl.GetServerlessFunctionWithName("WebhookFunction")
	if got := fmt.Sprint(wh.Environment.Variables["SWEEPER_FUNCTION_NAME"]); got != "REF:SweeperNudgeAlias" {
		t.Errorf("the webhook nudges %s, want the nudge alias", got)
	}
	cfg, err := tmpl.GetLambdaEventInvokeConfigWithName("SweeperNudgeInvokeConfig")
	if err != nil {
		t.Fatal(err)
	}
	maxAge, _ := numberDefault(rawTemplate(t), "NudgeMaxAgeSeconds")
	if cfg.FunctionName != "REF:SweeperFunction" || cfg.Qualifier != sweepevent.NudgeAlias ||
		cfg.MaximumRetryAttempts == nil || *cfg.MaximumRetryAttempts != 0 ||
		cfg.MaximumEventAgeInSeconds == nil || fmt.Sprint(*cfg.MaximumEventAgeInSeconds) != fmt.Sprint(maxAge) ||
		!slices.Contains(cfg.AWSCloudFormationDependsOn, "SweeperNudgeAlias") {
		t.Errorf("nudge alias invoke config %+v (depends on %v): want no retries, NudgeMaxAgeSeconds, after the alias",
			cfg, cfg.AWSCloudFormationDependsOn)
	}
	if out, ok := tmpl.Outputs["SweeperDrainAliasArn"]; !ok || fmt.Sprint(out.Value) != "REF:SweeperDrainAlias" {
		t.Errorf("output SweeperDrainAliasArn %+v, want the drain alias's ARN", out)
	}
}

// TestWebhookIsThrottled: the HTTP API passes on at most WebhookRateLimit
// requests a second (WebhookBurstLimit at once), the webhook runs in at most
// WebhookConcurrency containers (0: no reservation), and it answers within
// GitHub's 10 s delivery timeout or not at all.
func TestWebhookIsThrottled(t *testing.T) {
	t.Parallel()
	doc := rawTemplate(t)
	route := section(doc, "Resources", "WebhookApi", "Properties", "DefaultRouteSettings")
	if route["ThrottlingRateLimit"] != "WebhookRateLimit" || route["ThrottlingBurstLimit"] != "WebhookBurstLimit" {
		t.Errorf("WebhookApi DefaultRouteSettings %v, want the rate and burst from WebhookRateLimit and WebhookBurstLimit", route)
	}
	for _, name := range []string{"WebhookRateLimit", "WebhookBurstLimit"} {
		p := section(doc, "Parameters", name)
		if p["Type"] != "Number" || p["MinValue"] != 1 || p["Default"] == nil {
			t.Errorf("parameter %s %v: want a Number of at least 1 with a default", name, p)
		}
	}
	wh := section(doc, "Resources", "WebhookFunction", "Properties")
	if got := fmt.Sprint(wh["ReservedConcurrentExecutions"]); got != "[BoundedWebhook WebhookConcurrency AWS::NoValue]" {
		t.Errorf("webhook ReservedConcurrentExecutions %s, want WebhookConcurrency unless BoundedWebhook is false", got)
	}
	if c := fmt.Sprint(section(doc, "Conditions")["BoundedWebhook"]); c != "[[WebhookConcurrency 0]]" {
		t.Errorf("condition BoundedWebhook %s, want WebhookConcurrency not 0", c)
	}
	fn, _ := openTemplate(t).GetServerlessFunctionWithName("WebhookFunction")
	def, _ := numberDefault(doc, "WebhookConcurrency")
	if fn.ReservedConcurrentExecutions == nil || def == nil || fmt.Sprint(*fn.ReservedConcurrentExecutions) != fmt.Sprint(def) || def == 0 {
		t.Errorf("webhook reserved concurrency %v, want the WebhookConcurrency parameter's default (%v, not 0)", fn.ReservedConcurrentExecutions, def)
	}
	if fn.Timeout == nil || *fn.Timeout > 10 {
		t.Errorf("webhook timeout %v, want at most GitHub's 10 s", fn.Timeout)
	}
}
