package tests

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// poolsPath is where the build puts the pools file in both packages.
const poolsPath = "/var/task/pools.yaml"

// rawTemplate is template.yaml as plain YAML (intrinsic tags dropped), for the
// sections goformation does not model (Globals, Conditions, Parameters' details).
func rawTemplate(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func section(doc map[string]any, path ...string) map[string]any {
	for _, p := range path {
		doc, _ = doc[p].(map[string]any)
	}
	return doc
}

// TestPoolsFileIsWhereTheBuildPutsIt: no parameter can point the functions
// elsewhere than the file every build target writes (a changed PoolsFile
// parameter used to break start-up).
func TestPoolsFileIsWhereTheBuildPutsIt(t *testing.T) {
	t.Parallel()
	if _, ok := section(rawTemplate(t), "Parameters")["PoolsFile"]; ok {
		t.Error("a PoolsFile parameter is back: the build always writes pools.yaml")
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"WebhookFunction", "SweeperFunction"} {
		target := targetRecipe(string(mk), "build-"+fn)
		if !strings.Contains(target, "$(ARTIFACTS_DIR)/bootstrap") || !strings.Contains(target, "$(ARTIFACTS_DIR)/"+strings.TrimPrefix(poolsPath, "/var/task/")) {
			t.Errorf("Makefile target build-%s does not write the bootstrap and %s:\n%s", fn, poolsPath, target)
		}
	}
}

// targetRecipe returns a Makefile target's recipe lines.
func targetRecipe(mk, target string) string {
	_, rest, ok := strings.Cut(mk, "\n"+target+":")
	if !ok {
		return ""
	}
	var out []string
	for _, line := range strings.Split(rest, "\n")[1:] {
		if !strings.HasPrefix(line, "\t") {
			break
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// TestCodeAndLogGroups: the code comes from the repository root (where the
// Makefile is), and each function logs into the stack's log group, bound by
// LoggingConfig.LogGroup, so the group exists (with its retention) before any
// invocation and names no function (no dependency cycle).
func TestCodeAndLogGroups(t *testing.T) {
	t.Parallel()
	g := globals(t)
	if g["CodeUri"] != "." {
		t.Errorf("Globals CodeUri %v, want . (the Makefile's directory)", g["CodeUri"])
	}
	tmpl := openTemplate(t)
	doc := rawTemplate(t) // goformation does not model a SAM function's LoggingConfig
	for _, name := range []string{"Webhook", "Sweeper"} {
		lc := section(doc, "Resources", name+"Function", "Properties", "LoggingConfig")
		if lc["LogGroup"] != name+"LogGroup" { // the !Ref's target
			t.Errorf("%sFunction LoggingConfig %v, want LogGroup bound to %sLogGroup", name, lc, name)
		}
		if lc["LogFormat"] != "JSON" || lc["ApplicationLogLevel"] != "LogLevel" {
			t.Errorf("%sFunction logs %v, want JSON at LogLevel", name, lc)
		}
		lg, err := tmpl.GetLogsLogGroupWithName(name + "LogGroup")
		if err != nil {
			t.Fatal(err)
		}
		if lg.LogGroupName == nil || strings.Contains(*lg.LogGroupName, "Function") || lg.RetentionInDays == nil {
			t.Errorf("%sLogGroup name %v retention %v: want a name from the stack, not the function, and a retention", name, lg.LogGroupName, lg.RetentionInDays)
		}
	}
}

// TestOptionalDeploymentParameters: the installation id, the EKS endpoint and CA,
// and the VPC settings are optional (empty defaults that the code reads as
// unset), the enterprise PAT secret exists only when asked for.
func TestOptionalDeploymentParameters(t *testing.T) {
	t.Parallel()
	doc := rawTemplate(t)
	params := section(doc, "Parameters")
	for _, name := range []string{"GitHubAppInstallationId", "EksEndpoint", "EksCertificateAuthority", "VpcSubnetIds", "VpcSecurityGroupIds"} {
		p, ok := params[name].(map[string]any)
		if !ok || p["Default"] != "" {
			t.Errorf("parameter %s = %v, want an empty default (optional)", name, p)
		}
	}
	if p := section(doc, "Parameters", "CreateEnterpriseTokenSecret"); p["Default"] != "false" {
		t.Errorf("CreateEnterpriseTokenSecret %v, want default false", p)
	}
	vpc := fmt.Sprint(globals(t)["VpcConfig"])
	for _, want := range []string{"InVpc", "SubnetIds", "SecurityGroupIds", "AWS::NoValue"} {
		if !strings.Contains(vpc, want) {
			t.Errorf("Globals VpcConfig %s lacks %s: want it conditional on InVpc, for both functions", vpc, want)
		}
	}
	if _, ok := section(doc, "Conditions")["InVpc"]; !ok {
		t.Error("no InVpc condition")
	}
	tmpl := openTemplate(t)
	sec, ok := tmpl.Resources["GitHubEnterpriseToken"]
	if !ok || sec.AWSCloudFormationType() != "AWS::SecretsManager::Secret" {
		t.Fatal("no GitHubEnterpriseToken secret")
	}
	if c := section(doc, "Resources", "GitHubEnterpriseToken")["Condition"]; c != "WithEnterpriseToken" {
		t.Errorf("GitHubEnterpriseToken condition %v, want WithEnterpriseToken", c)
	}
	for _, out := range []string{"SweeperFunctionName", "GitHubEnterpriseTokenArn"} {
		if _, ok := tmpl.Outputs[out]; !ok {
			t.Errorf("no %s output", out)
		}
	}
}

// TestSweeperConcurrencyIsBounded: nudges cannot start unbounded sweeper
// containers (each reading secrets and the cluster at init); a throttled nudge
// waits in the asynchronous queue for a bounded time.
func TestSweeperConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	tmpl := openTemplate(t)
	fn, _ := tmpl.GetServerlessFunctionWithName("SweeperFunction")
	if fn.ReservedConcurrentExecutions == nil || *fn.ReservedConcurrentExecutions != 5 {
		t.Errorf("sweeper reserved concurrency %v, want the SweeperConcurrency parameter (default 5)", fn.ReservedConcurrentExecutions)
	}
	doc := rawTemplate(t)
	if c := section(doc, "Conditions")["BoundedSweeper"]; c == nil {
		t.Error("no BoundedSweeper condition (SweeperConcurrency 0: no reservation)")
	}
	cfg := section(doc, "Resources", "SweeperFunction", "Properties", "EventInvokeConfig")
	if cfg["MaximumRetryAttempts"] != 0 || cfg["MaximumEventAgeInSeconds"] == nil {
		t.Errorf("sweeper EventInvokeConfig %v, want no retries and a maximum event age", cfg)
	}
}
