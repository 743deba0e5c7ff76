// Package tests holds the suites that look at the product as a whole: the SAM
// template, and (on the local stack) end-to-end runs.
package tests

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyntypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	cfndynamodb "github.com/awslabs/goformation/v7/cloudformation/dynamodb"
	"github.com/awslabs/goformation/v7/intrinsics"
	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// parsing serialises goformation's parses: each one rewrites a package-level
// map of tag resolvers that another parse may be reading (a fatal concurrent
// map access between parallel tests).
var parsing sync.Mutex

// Intrinsics become readable markers (goformation resolves !Ref to "" by default),
// so the test can tell what each value refers to.
func openTemplate(t *testing.T) *cloudformation.Template {
	t.Helper()
	marker := func(kind string) intrinsics.IntrinsicHandler {
		return func(_ string, input any, template any) any {
			if kind == "REF" {
				if def, ok := numberDefault(template, fmt.Sprint(input)); ok {
					return def // typed fields (RetentionInDays) need a number
				}
				if isList(template, fmt.Sprint(input)) {
					return []any{"REF:" + fmt.Sprint(input)} // typed fields (SubnetIds) need a list
				}
			}
			if v, ok := input.([]any); ok && kind == "IF" && len(v) == 3 {
				switch branch := v[1].(type) {
				case map[string]any, float64, int:
					return branch // a typed field (VpcConfig, a number) needs the value: the "true" branch
				}
			}
			switch v := input.(type) {
			case []any:
				parts := make([]string, len(v))
				for i, p := range v {
					parts[i] = fmt.Sprint(p)
				}
				return kind + ":" + strings.Join(parts, ".")
			default:
				return kind + ":" + fmt.Sprint(v)
			}
		}
	}
	raw := withoutLoggingConfig(t)
	parsing.Lock()
	tmpl, err := goformation.ParseYAMLWithOptions(raw, &intrinsics.ProcessorOptions{
		IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{
			"Ref": marker("REF"), "Fn::GetAtt": marker("GETATT"), "Fn::Sub": marker("SUB"), "Fn::If": marker("IF"),
		},
	})
	parsing.Unlock()
	if err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	return tmpl
}

// withoutLoggingConfig is template.yaml without the functions' LoggingConfig,
// which goformation's SAM function does not model (it refuses unknown fields);
// TestCodeAndLogGroups reads it from the raw YAML.
func withoutLoggingConfig(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile("../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, res := range mappingValues(mappingValue(doc.Content[0], "Resources")) {
		props := mappingValue(res, "Properties")
		if props == nil {
			continue
		}
		for i := 0; i+1 < len(props.Content); i += 2 {
			if props.Content[i].Value == "LoggingConfig" {
				props.Content = append(props.Content[:i], props.Content[i+2:]...)
				break
			}
		}
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func mappingValues(n *yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 1; i < len(n.Content); i += 2 {
			out = append(out, n.Content[i])
		}
	}
	return out
}

// numberDefault is the default of a Number parameter.
func numberDefault(template any, name string) (any, bool) {
	params, _ := template.(map[string]any)["Parameters"].(map[string]any)
	p, _ := params[name].(map[string]any)
	if p["Type"] != "Number" || p["Default"] == nil {
		return nil, false
	}
	return p["Default"], true
}

// isList: the parameter is a list (CommaDelimitedList, List<...>).
func isList(template any, name string) bool {
	params, _ := template.(map[string]any)["Parameters"].(map[string]any)
	p, _ := params[name].(map[string]any)
	typ, _ := p["Type"].(string)
	return typ == "CommaDelimitedList" || strings.HasPrefix(typ, "List<")
}

// globals reads the Globals section, which goformation does not merge into functions.
func globals(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Globals struct {
			Function map[string]any `yaml:"Function"`
		} `yaml:"Globals"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Globals.Function
}

func TestFunctions(t *testing.T) {
	t.Parallel()
	tmpl := openTemplate(t)
	g := globals(t)
	if g["Runtime"] != "provided.al2023" || g["Handler"] != "bootstrap" {
		t.Fatalf("Globals.Function runtime/handler = %v/%v, want provided.al2023/bootstrap", g["Runtime"], g["Handler"])
	}
	for name, env := range map[string][]string{
		"WebhookFunction": {"TABLE_NAME=REF:Table", "WEBHOOK_SECRET_ARN=REF:WebhookSecret", "SWEEPER_FUNCTION_NAME=REF:SweeperNudgeAlias", "POOLS_CONFIG=" + poolsPath},
		"SweeperFunction": {"TABLE_NAME=REF:Table", "GITHUB_APP_PRIVATE_KEY_ARN=REF:GitHubAppPrivateKey", "EKS_CLUSTER_NAME=REF:ClusterName", "POOLS_CONFIG=" + poolsPath,
			"EKS_ENDPOINT=REF:EksEndpoint", "EKS_CA=REF:EksCertificateAuthority", "GITHUB_APP_INSTALLATION_ID=REF:GitHubAppInstallationId",
			"GITHUB_TOKEN_ARN=IF:WithEnterpriseToken.REF:GitHubEnterpriseToken."},
	} {
		fn, err := tmpl.GetServerlessFunctionWithName(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if fn.AWSCloudFormationMetadata["BuildMethod"] != "makefile" {
			t.Errorf("%s: BuildMethod %v, want makefile", name, fn.AWSCloudFormationMetadata["BuildMethod"])
		}
		if fn.Runtime != nil && *fn.Runtime != "provided.al2023" || fn.Handler != nil && *fn.Handler != "bootstrap" {
			t.Errorf("%s overrides the runtime or handler", name)
		}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			if got := fmt.Sprint(fn.Environment.Variables[k]); got != v {
				t.Errorf("%s: env %s = %q, want %q", name, k, got, v)
			}
		}
	}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	tmpl := openTemplate(t)
	wh, _ := tmpl.GetServerlessFunctionWithName("WebhookFunction")
	ev, ok := wh.Events["Webhook"]
	if !ok || ev.Type != "HttpApi" || ev.Properties == nil || ev.Properties.HttpApiEvent == nil {
		t.Fatalf("webhook event %+v, want an HttpApi event", ev)
	}
	if h := ev.Properties.HttpApiEvent; h.Method == nil || *h.Method != "POST" || h.Path == nil || *h.Path != "/webhook" {
		t.Fatalf("webhook route %+v, want POST /webhook", h)
	}
	sw, _ := tmpl.GetServerlessFunctionWithName("SweeperFunction")
	sched, ok := sw.Events["Schedule"]
	if !ok || sched.Type != "Schedule" || sched.Properties == nil || sched.Properties.ScheduleEvent == nil ||
		fmt.Sprint(sched.Properties.ScheduleEvent.Schedule) != "REF:SweepSchedule" {
		t.Fatalf("sweeper schedule %+v, want a Schedule event on the SweepSchedule parameter", sched)
	}
	if _, ok := tmpl.Outputs["WebhookUrl"]; !ok {
		t.Fatal("no WebhookUrl output")
	}
}

func TestTableMatchesTheCode(t *testing.T) {
	t.Parallel()
	tmpl := openTemplate(t)
	tbl, err := tmpl.GetDynamoDBTableWithName("Table")
	if err != nil {
		t.Fatal(err)
	}
	// The code's schema (what table.Create makes locally), in the template's terms.
	def := table.Definition("Table")
	if tbl.BillingMode == nil || *tbl.BillingMode != string(def.BillingMode) {
		t.Errorf("billing mode %v, want %s", tbl.BillingMode, def.BillingMode)
	}
	var gotAttrs, wantAttrs []string
	for _, a := range tbl.AttributeDefinitions {
		gotAttrs = append(gotAttrs, a.AttributeName+":"+a.AttributeType)
	}
	for _, a := range def.AttributeDefinitions {
		wantAttrs = append(wantAttrs, aws.ToString(a.AttributeName)+":"+string(a.AttributeType))
	}
	slices.Sort(gotAttrs)
	slices.Sort(wantAttrs)
	if !slices.Equal(gotAttrs, wantAttrs) {
		t.Errorf("attribute definitions %v, want %v", gotAttrs, wantAttrs)
	}
	if got, want := templateKeys(tbl.KeySchema), codeKeys(def.KeySchema); got != want {
		t.Errorf("key schema %s, want %s", got, want)
	}
	var gotIdx, wantIdx []string
	for _, g := range tbl.GlobalSecondaryIndexes {
		proj := ""
		if g.Projection != nil && g.Projection.ProjectionType != nil {
			proj = *g.Projection.ProjectionType + fmt.Sprint(g.Projection.NonKeyAttributes)
		}
		if g.ProvisionedThroughput != nil {
			t.Errorf("index %s has provisioned throughput on an on-demand table", g.IndexName)
		}
		gotIdx = append(gotIdx, g.IndexName+" "+templateKeys(g.KeySchema)+" "+proj)
	}
	for _, g := range def.GlobalSecondaryIndexes {
		wantIdx = append(wantIdx, aws.ToString(g.IndexName)+" "+codeKeys(g.KeySchema)+" "+
			string(g.Projection.ProjectionType)+fmt.Sprint(g.Projection.NonKeyAttributes))
	}
	if !slices.Equal(gotIdx, wantIdx) {
		t.Errorf("global secondary indexes\n got %q\nwant %q", gotIdx, wantIdx)
	}
	if ttl := tbl.TimeToLiveSpecification; ttl == nil || ttl.AttributeName == nil || *ttl.AttributeName != table.TTLAttribute || !ttl.Enabled {
		t.Errorf("TTL %+v, want enabled on %s", ttl, table.TTLAttribute)
	}
	if pitr := tbl.PointInTimeRecoverySpecification; pitr == nil || pitr.PointInTimeRecoveryEnabled == nil || !*pitr.PointInTimeRecoveryEnabled {
		t.Error("point-in-time recovery is off")
	}
}

func templateKeys(ks []cfndynamodb.Table_KeySchema) string {
	var parts []string
	for _, k := range ks {
		parts = append(parts, k.KeyType+"="+k.AttributeName)
	}
	return strings.Join(parts, ",")
}

func codeKeys(ks []dyntypes.KeySchemaElement) string {
	var parts []string
	for _, k := range ks {
		parts = append(parts, string(k.KeyType)+"="+aws.ToString(k.AttributeName))
	}
	return strings.Join(parts, ",")
}

// TestIAMIsScoped: every statement names its resources (no "*"), and each role
// gets only what its code calls.
func TestIAMIsScoped(t *testing.T) {
	t.Parallel()
	tmpl := openTemplate(t)
	want := map[string]map[string]string{
		"WebhookFunction": {"dynamodb:UpdateItem": "GETATT:Table.Arn", "dynamodb:GetItem": "GETATT:Table.Arn", "secretsmanager:GetSecretValue": "REF:WebhookSecret",
			"lambda:InvokeFunction": "REF:SweeperNudgeAlias"},
		"SweeperFunction": {"dynamodb:GetItem": "GETATT:Table.Arn", "dynamodb:PutItem": "GETATT:Table.Arn", "dynamodb:UpdateItem": "GETATT:Table.Arn",
			"dynamodb:Query":                "[GETATT:Table.Arn SUB:${Table.Arn}/index/" + table.ActiveIndex + "]",
			"secretsmanager:GetSecretValue": "[REF:GitHubAppPrivateKey IF:WithEnterpriseToken.REF:GitHubEnterpriseToken.REF:AWS::NoValue]",
			"eks:DescribeCluster":           "SUB:arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:cluster/${ClusterName}"},
	}
	for name, actions := range want {
		fn, _ := tmpl.GetServerlessFunctionWithName(name)
		if fn.Policies == nil || fn.Policies.IAMPolicyDocumentArray == nil {
			t.Fatalf("%s: no inline policy documents", name)
		}
		got := map[string]string{}
		for _, doc := range *fn.Policies.IAMPolicyDocumentArray {
			for _, raw := range doc.Statement {
				st := raw.(map[string]any)
				res := fmt.Sprint(st["Resource"])
				if strings.Contains(res, "*") && !strings.HasPrefix(res, "SUB:") || res == "*" {
					t.Errorf("%s: statement %v has a wildcard resource", name, st)
				}
				for _, a := range st["Action"].([]any) {
					got[fmt.Sprint(a)] = res
				}
			}
		}
		if !mapsEqual(got, actions) {
			t.Errorf("%s: actions→resources\n got %v\nwant %v", name, got, actions)
		}
	}
}

func TestSecretsAndAccessEntry(t *testing.T) {
	t.Parallel()
	tmpl := openTemplate(t)
	var types []string
	for _, r := range tmpl.Resources {
		types = append(types, r.AWSCloudFormationType())
	}
	for _, want := range []string{"AWS::SecretsManager::Secret", "AWS::EKS::AccessEntry", "AWS::Logs::LogGroup", "AWS::Serverless::HttpApi"} {
		if !slices.Contains(types, want) {
			t.Errorf("no %s in the template", want)
		}
	}
	ae, err := tmpl.GetEKSAccessEntryWithName("SweeperAccessEntry")
	if err != nil {
		t.Fatal(err)
	}
	if ae.PrincipalArn != "GETATT:SweeperFunctionRole.Arn" || !slices.Equal(ae.KubernetesGroups, []string{"REF:KubernetesGroup"}) {
		t.Errorf("access entry maps %q to %v, want the sweeper role to the KubernetesGroup parameter", ae.PrincipalArn, ae.KubernetesGroups)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
