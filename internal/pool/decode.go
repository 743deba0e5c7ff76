package pool

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/suggest"
)

// decodeStrict decodes node into out (a pointer to a struct) and reports every
// unknown field and badly typed value with its path from the document root and
// its position, e.g. `pools[0].scaleUpTriggers[1].amount: line 12: cannot
// unmarshal !!str "x" into int`. A field with a problem keeps its zero value.
func decodeStrict(node *yaml.Node, out any, path string) []*Problem {
	d := &decoder{}
	d.value(node, reflect.ValueOf(out).Elem(), path)
	return d.problems
}

var (
	nodeType        = reflect.TypeFor[yaml.Node]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	// yamlLine is the position yaml.v3 and our UnmarshalYAMLs put in their errors;
	// a Problem carries it apart.
	yamlLine = regexp.MustCompile(`^line \d+: `)
)

type decoder struct{ problems []*Problem }

func (d *decoder) fail(node *yaml.Node, path, format string, args ...any) {
	d.problems = append(d.problems, &Problem{Line: node.Line, Column: node.Column, Where: path,
		Message: fmt.Sprintf(format, args...), showLine: true, path: path})
}

func (d *decoder) value(node *yaml.Node, v reflect.Value, path string) {
	if node.Kind == yaml.AliasNode {
		node = node.Alias
	}
	t := v.Type()
	switch {
	case t == nodeType || reflect.PointerTo(t).Implements(unmarshalerType):
		d.leaf(node, v, path)
	case t.Kind() == reflect.Pointer:
		if node.Tag == "!!null" {
			return
		}
		v.Set(reflect.New(t.Elem()))
		d.value(node, v.Elem(), path)
	case t.Kind() == reflect.Struct && node.Kind == yaml.MappingNode:
		d.mapping(node, v, path)
	case t.Kind() == reflect.Slice && node.Kind == yaml.SequenceNode:
		v.Set(reflect.MakeSlice(t, len(node.Content), len(node.Content)))
		for i, item := range node.Content {
			d.value(item, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Slice:
		if node.Tag != "!!null" {
			d.fail(node, path, "want a %s, got %s", shape(t), node.Tag)
		}
	default:
		d.leaf(node, v, path)
	}
}

func (d *decoder) mapping(node *yaml.Node, v reflect.Value, path string) {
	fields := map[string]int{}
	var names []string
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			fields[name] = i
			names = append(names, name)
		}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, val := node.Content[i], node.Content[i+1]
		fieldPath := join(path, key.Value)
		idx, ok := fields[key.Value]
		switch {
		case !ok:
			if s := suggest.Closest(key.Value, names); s != "" {
				d.fail(key, fieldPath, "unknown field; did you mean %s?", s)
				d.problems[len(d.problems)-1].suggestion = s
			} else {
				d.fail(key, fieldPath, "unknown field")
			}
		case seen[key.Value]:
			d.fail(key, fieldPath, "field given twice")
		default:
			seen[key.Value] = true
			d.value(val, v.Field(idx), fieldPath)
		}
	}
}

func (d *decoder) leaf(node *yaml.Node, v reflect.Value, path string) {
	if err := node.Decode(v.Addr().Interface()); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n  ")
		d.fail(node, path, "%s", yamlLine.ReplaceAllString(msg, ""))
	}
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func shape(t reflect.Type) string {
	if t.Kind() == reflect.Slice {
		return "list"
	}
	return "mapping"
}
