package arcimport

import (
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// crdProperties is the property names of the schema at path in an ARC CRD of
// testdata (v0.22.3, as published).
func crdProperties(t *testing.T, file string, path ...string) []string {
	t.Helper()
	raw, err := os.ReadFile("testdata/arc-manifests/crds/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema schema `yaml:"openAPIV3Schema"`
				} `yaml:"schema"`
			} `yaml:"versions"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, p := range path {
		if p == "[]" {
			s = *s.Items
			continue
		}
		s = s.Properties[p]
	}
	var names []string
	for k := range s.Properties {
		names = append(names, k)
	}
	if len(names) == 0 {
		t.Fatalf("%s %v: no properties", file, path)
	}
	return names
}

type schema struct {
	Properties map[string]schema `yaml:"properties"`
	Items      *schema           `yaml:"items"`
}

// TestEveryCRDFieldIsKnown: every field of ARC v0.22.3's CRDs is one the
// converter carries or reports by name, never as an unknown field.
func TestEveryCRDFieldIsKnown(t *testing.T) {
	for _, tc := range []struct {
		file  string
		path  []string
		known [][]string
	}{
		{"actions.summerwind.dev_runnerdeployments.yaml", []string{"spec"}, [][]string{runnerDeploymentFields}},
		{"actions.summerwind.dev_runnerdeployments.yaml", []string{"spec", "template"}, [][]string{templateFields}},
		{"actions.summerwind.dev_runnerdeployments.yaml", []string{"spec", "template", "spec"}, [][]string{runnerConfigFields, runnerPodFields}},
		{"actions.summerwind.dev_runners.yaml", []string{"spec"}, [][]string{runnerConfigFields, runnerPodFields}},
		{"actions.summerwind.dev_runnersets.yaml", []string{"spec"}, [][]string{runnerConfigFields, statefulSetFields}},
		{"actions.summerwind.dev_horizontalrunnerautoscalers.yaml", []string{"spec"}, [][]string{hraFields}},
		{"actions.summerwind.dev_horizontalrunnerautoscalers.yaml", []string{"spec", "scaleTargetRef"}, [][]string{scaleTargetFields}},
		{"actions.summerwind.dev_horizontalrunnerautoscalers.yaml", []string{"spec", "scaleUpTriggers", "[]"}, [][]string{triggerFields}},
		{"actions.summerwind.dev_horizontalrunnerautoscalers.yaml", []string{"spec", "scaleUpTriggers", "[]", "githubEvent"}, [][]string{eventFields}},
		{"actions.summerwind.dev_horizontalrunnerautoscalers.yaml", []string{"spec", "scheduledOverrides", "[]"}, [][]string{overrideFields}},
		{"actions.summerwind.dev_horizontalrunnerautoscalers.yaml", []string{"spec", "scheduledOverrides", "[]", "recurrenceRule"}, [][]string{recurrenceFields}},
	} {
		known := slices.Concat(tc.known...)
		for _, f := range crdProperties(t, tc.file, tc.path...) {
			if !slices.Contains(known, f) {
				t.Errorf("%s %v: field %s is not known to the converter", tc.file, tc.path, f)
			}
		}
	}
}
