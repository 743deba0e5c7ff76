// Command poolschema writes the JSON Schema of the pools file, generated from
// package pool's types (their YAML names, and their doc comments as
// descriptions), to docs/pools.schema.json:
//
//	go run ./local/cmd/poolschema > docs/pools.schema.json
//
// Editors that read a `# yaml-language-server: $schema=...` comment (the YAML
// extension of VS Code, and others through yaml-language-server) then flag an
// unknown field or a wrong type while the file is typed. The schema says what
// a field may hold; `runnerscaler validate` checks all the rest.
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

func main() {
	out, err := generate("internal/pool")
	if err != nil {
		fmt.Fprintln(os.Stderr, "poolschema:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

// generate returns the schema; dir is package pool's source, read for the
// descriptions.
func generate(dir string) ([]byte, error) {
	docs, err := fieldDocs(dir)
	if err != nil {
		return nil, err
	}
	g := generator{docs: docs, defs: map[string]any{}}
	root := g.object(reflect.TypeFor[pool.Config]())
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = "https://github.com/runnerscaler/runnerscaler/docs/pools.schema.json"
	root["title"] = "runnerscaler pools file"
	root["$defs"] = g.defs
	out, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// fieldDocs maps "Type.Field" (and "Type") to its doc comment's first paragraph.
func fieldDocs(dir string) (map[string]string, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				spec, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				st, ok := spec.Type.(*ast.StructType)
				if !ok {
					return true
				}
				for _, field := range st.Fields.List {
					text := field.Doc.Text()
					if text == "" {
						text = field.Comment.Text()
					}
					for _, name := range field.Names {
						docs[spec.Name.Name+"."+name.Name] = firstParagraph(text)
					}
				}
				return true
			})
		}
		for _, t := range doc.New(pkg, "", doc.AllDecls).Types {
			docs[t.Name] = firstParagraph(t.Doc)
		}
	}
	return docs, nil
}

func firstParagraph(text string) string {
	p, _, _ := strings.Cut(strings.TrimSpace(text), "\n\n")
	return strings.Join(strings.Fields(p), " ")
}

type generator struct {
	docs map[string]string
	defs map[string]any
}

var (
	durationType = reflect.TypeFor[pool.Duration]()
	timeType     = reflect.TypeFor[pool.Time]()
	nodeType     = reflect.TypeFor[yaml.Node]()
)

// constraints are the values a field may take that its Go type does not say,
// from the package's own lists and limits.
var constraints = map[string]map[string]any{
	"Pool.Name":         {"pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": pool.MaxNameLength},
	"Pool.Arch":         {"enum": pool.Arches},
	"Pool.Registration": {"enum": []string{pool.RegistrationJIT, pool.RegistrationToken}},
	"Pool.MinReplicas":  {"minimum": 0},
	"Pool.MaxReplicas":  {"minimum": 1},
	"Pool.RerunsPerRun": {"minimum": 0, "maximum": pool.MaxRerunsPerRun},
	"Pool.ScaleDownDelaySecondsAfterScaleOut": {"minimum": 0},
	"RecurrenceRule.Frequency":                {"enum": pool.Frequencies},
	"Kubernetes.Template":                     {"type": "object", "description": "The runner's pod: a Kubernetes PodTemplateSpec (metadata, spec) with a container named runner, checked as the API server would by runnerscaler validate."},
	"Kubernetes.VolumeClaimTemplates":         {"type": "array", "items": map[string]any{"type": "object"}, "description": "Kubernetes PersistentVolumeClaims, one of each per runner, as a StatefulSet's volumeClaimTemplates."},
}

// required are the fields a pool file must give.
var required = map[string][]string{
	"Config":            {"pools"},
	"Pool":              {"name", "maxReplicas", "kubernetes"},
	"Kubernetes":        {"namespace"},
	"ScheduledOverride": {"startTime", "endTime", "minReplicas"},
	"HeadroomOverride":  {"startTime", "endTime", "replicas"},
}

// object returns the schema of struct t: its YAML fields, none other.
func (g *generator) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		key := t.Name() + "." + f.Name
		s := map[string]any{}
		if constraints[key]["type"] == nil { // else the constraint says all
			s = g.schema(f.Type)
		}
		if d := g.docs[key]; d != "" {
			// The file's name of the field, not the Go one: "Image is ..." → "image is ...".
			if rest, ok := strings.CutPrefix(d, f.Name+" "); ok {
				d = name + " " + rest
			}
			s["description"] = d
		}
		for k, v := range constraints[key] {
			s[k] = v
		}
		props[name] = s
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if r := required[t.Name()]; r != nil {
		s["required"] = r
	}
	if d := g.docs[t.Name()]; d != "" {
		s["description"] = d
	}
	return s
}

// schema returns the schema of a field of type t; structs go to $defs.
func (g *generator) schema(t reflect.Type) map[string]any {
	switch {
	case t == durationType:
		return map[string]any{"type": "string", "pattern": `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`}
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == nodeType:
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Struct:
		if _, ok := g.defs[t.Name()]; !ok {
			g.defs[t.Name()] = nil // a recursive type refers to itself
			g.defs[t.Name()] = g.object(t)
		}
		return map[string]any{"$ref": "#/$defs/" + t.Name()}
	}
	panic(fmt.Sprintf("poolschema: no schema for %s", t))
}
