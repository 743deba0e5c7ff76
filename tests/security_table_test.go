package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The principals of docs/security.md's grants table, as its first column
// names them (backquotes dropped).
const (
	webhookRole      = "webhook role"
	sweeperRole      = "sweeper role"
	sweeperNamespace = "group runnerscaler-sweeper, in each runner namespace"
	sweeperCluster   = "group runnerscaler-sweeper, cluster-wide"
	sweeperGroup     = "runnerscaler-sweeper"
)

// grant is one row of the grants table: a principal's actions on resources,
// limited to some partition keys or names ("" each: no limit). Each list is
// sorted and joined by spaces.
type grant struct{ principal, actions, resources, limits string }

func (g grant) String() string {
	return fmt.Sprintf("| %s | %s | %s | %s |", g.principal, g.actions, g.resources, g.limits)
}

func newGrant(principal string, actions, resources, limits []string) grant {
	norm := func(v []string) string {
		v = slices.Clone(v)
		slices.Sort(v)
		return strings.Join(slices.Compact(v), " ")
	}
	return grant{principal, norm(actions), norm(resources), norm(limits)}
}

// TestSecurityTableMatchesTheGrants: docs/security.md's grants table has one
// row per statement of the functions' IAM policies in template.yaml and per
// rule of infra/rbac*.yaml's Roles and ClusterRole, and no other: what the
// page says each principal may do is what it is granted.
func TestSecurityTableMatchesTheGrants(t *testing.T) {
	t.Parallel()
	want := append(iamGrants(t), rbacGrants(t)...)
	got := docGrants(t)
	key := func(g grant) string { return g.String() }
	slices.SortFunc(want, func(a, b grant) int { return strings.Compare(key(a), key(b)) })
	want = slices.Compact(want) // both runner namespaces' Roles have the same rules
	slices.SortFunc(got, func(a, b grant) int { return strings.Compare(key(a), key(b)) })
	for _, g := range want {
		if !slices.Contains(got, g) {
			t.Errorf("granted, missing from docs/security.md's table:\n%s", g)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("in docs/security.md's table, not granted:\n%s", g)
		}
	}
}

// iamGrants are the statements of the functions' inline policies. A
// statement that is not an Allow, or has a condition other than
// dynamodb:LeadingKeys under ForAllValues:StringLike, fails the test: the
// table could not say it.
func iamGrants(t *testing.T) []grant {
	t.Helper()
	tmpl := openTemplate(t)
	var out []grant
	for name, principal := range map[string]string{"WebhookFunction": webhookRole, "SweeperFunction": sweeperRole} {
		fn, err := tmpl.GetServerlessFunctionWithName(name)
		if err != nil {
			t.Fatal(err)
		}
		if fn.Policies == nil || fn.Policies.IAMPolicyDocumentArray == nil {
			t.Fatalf("%s: no inline policy documents", name)
		}
		for _, doc := range *fn.Policies.IAMPolicyDocumentArray {
			for _, raw := range doc.Statement {
				st := raw.(map[string]any)
				if st["Effect"] != "Allow" {
					t.Errorf("%s: statement %v is not an Allow", name, st)
				}
				var limits []string
				if cond, ok := st["Condition"]; ok {
					limits = leadingKeys(t, name, cond)
				}
				out = append(out, newGrant(principal, strings.Fields(flat(st["Action"])), resourceNames(t, st["Resource"]), limits))
			}
		}
	}
	return out
}

// leadingKeys are the partition key patterns of a statement's condition.
func leadingKeys(t *testing.T, fn string, cond any) []string {
	t.Helper()
	c, _ := cond.(map[string]any)
	like, _ := c["ForAllValues:StringLike"].(map[string]any)
	keys, ok := like["dynamodb:LeadingKeys"]
	if len(c) != 1 || len(like) != 1 || !ok {
		t.Errorf("%s: condition %v: the table says only ForAllValues:StringLike dynamodb:LeadingKeys", fn, cond)
	}
	return strings.Fields(flat(keys))
}

// flat is a scalar or a list of scalars as space-separated words.
func flat(v any) string {
	if list, ok := v.([]any); ok {
		parts := make([]string, len(list))
		for i, p := range list {
			parts[i] = fmt.Sprint(p)
		}
		return strings.Join(parts, " ")
	}
	return fmt.Sprint(v)
}

// pseudoParameters are the ARN parts a resource's name leaves out.
var pseudoParameters = strings.NewReplacer("${AWS::Partition}", "partition", "${AWS::Region}", "region", "${AWS::AccountId}", "account")

// resourceNames names a statement's resources as the table does, from
// openTemplate's markers: a logical ID for !Ref and !GetAtt (Table for the
// table's ARN), Table/index/active for ${Table.Arn}/index/active, the
// resource part of an ARN (cluster/${ClusterName}), the resource of an !If's
// branch that is not AWS::NoValue.
func resourceNames(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	for _, r := range strings.Fields(flat(v)) {
		kind, value, _ := strings.Cut(r, ":")
		switch kind {
		case "REF":
			out = append(out, value)
		case "GETATT":
			out = append(out, strings.TrimSuffix(value, ".Arn"))
		case "SUB":
			if parts := strings.SplitN(pseudoParameters.Replace(value), ":", 6); len(parts) == 6 && parts[0] == "arn" {
				value = parts[5]
			}
			out = append(out, regexp.MustCompile(`^\$\{(\w+)\.Arn\}`).ReplaceAllString(value, "$1"))
		case "IF":
			for _, branch := range strings.Split(value, ".")[1:] {
				if branch != "REF:AWS::NoValue" {
					out = append(out, resourceNames(t, branch)...)
				}
			}
		default:
			t.Errorf("resource %q: the table cannot name it", r)
		}
	}
	return out
}

// rbacGrants are the rules of infra/rbac.yaml's and infra/rbac-docker.yaml's
// Roles (in each runner namespace) and ClusterRoles (cluster-wide), each
// bound to the sweeper's group only.
func rbacGrants(t *testing.T) []grant {
	t.Helper()
	var out []grant
	for _, path := range []string{"../infra/rbac.yaml", "../infra/rbac-docker.yaml"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			doc, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			switch obj["kind"] {
			case "Role", "ClusterRole":
				var role rbacv1.ClusterRole // a Role's fields are a ClusterRole's
				if err := json.Unmarshal(doc, &role); err != nil {
					t.Fatal(err)
				}
				principal := map[any]string{"Role": sweeperNamespace, "ClusterRole": sweeperCluster}[obj["kind"]]
				for _, rule := range role.Rules {
					out = append(out, newGrant(principal, rule.Verbs, ruleResources(rule), rule.ResourceNames))
				}
			case "RoleBinding", "ClusterRoleBinding":
				var b rbacv1.ClusterRoleBinding
				if err := json.Unmarshal(doc, &b); err != nil {
					t.Fatal(err)
				}
				if len(b.Subjects) != 1 || b.Subjects[0].Kind != rbacv1.GroupKind || b.Subjects[0].Name != sweeperGroup {
					t.Errorf("%s: %s %s binds %+v, want the group %s only", path, obj["kind"], b.Name, b.Subjects, sweeperGroup)
				}
			}
		}
	}
	return out
}

// ruleResources names a rule's resources as <group>/<resource> (<resource>
// for the core group).
func ruleResources(rule rbacv1.PolicyRule) []string {
	var out []string
	for _, g := range rule.APIGroups {
		for _, r := range rule.Resources {
			if g != "" {
				r = g + "/" + r
			}
			out = append(out, r)
		}
	}
	return out
}

// docGrants are the rows of docs/security.md's grants table: the table whose
// header is "| principal | actions | resources | limited to |". In each
// cell but the principal's, the backquoted words count.
func docGrants(t *testing.T) []grant {
	t.Helper()
	raw, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	start := slices.IndexFunc(lines, func(l string) bool {
		return strings.Join(strings.Fields(l), " ") == "| principal | actions | resources | limited to |"
	})
	if start < 0 || start+2 > len(lines) {
		t.Fatal("docs/security.md has no table headed | principal | actions | resources | limited to |")
	}
	quoted := regexp.MustCompile("`([^`]+)`")
	words := func(cell string) []string {
		var out []string
		for _, m := range quoted.FindAllStringSubmatch(cell, -1) {
			out = append(out, m[1])
		}
		return out
	}
	var out []grant
	for _, l := range lines[start+2:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("docs/security.md: grants row %q has %d cells, want 4", l, len(cells))
		}
		principal := strings.TrimSpace(strings.ReplaceAll(cells[0], "`", ""))
		out = append(out, newGrant(principal, words(cells[1]), words(cells[2]), words(cells[3])))
	}
	return out
}
