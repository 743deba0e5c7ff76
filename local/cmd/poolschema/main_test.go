package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

const committed = "../../../docs/pools.schema.json"

// TestSchemaIsCurrent: the committed schema is the one the pool types give;
// after changing them, run `go run ./local/cmd/poolschema > docs/pools.schema.json`.
func TestSchemaIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := generate("../../../internal/pool")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what the pool types give: run go run ./local/cmd/poolschema > docs/pools.schema.json", committed)
	}
}

// TestExamplesFollowTheSchema: every pools file shipped follows the schema
// (what an editor checks while typing), and a misspelt field does not.
func TestExamplesFollowTheSchema(t *testing.T) {
	t.Parallel()
	c := jsonschema.NewCompiler()
	schema, err := c.Compile(committed)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../../examples/pools/*.yaml")
	files = append(files, "../../../infra/pools.example.yaml", "../../../infra/pools.yaml")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(instance(t, raw)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	bad := "pools:\n  - name: a\n    organization: o\n    maxReplica: 3\n    kubernetes: {namespace: n, image: i}\n"
	if err := schema.Validate(instance(t, []byte(bad))); err == nil || !strings.Contains(err.Error(), "maxReplica") {
		t.Errorf("a misspelt field: %v, want a refusal naming it", err)
	}
}

func instance(t *testing.T, raw []byte) any {
	t.Helper()
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
