package pool

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeStrict decodes node into out (a pointer to a struct) and reports the first
// unknown field or badly typed value with its path from the document root, e.g.
// `pools[0].scaleUpTriggers[1].amount: line 12: cannot unmarshal !!str "x" into int`.
func decodeStrict(node *yaml.Node, out any, path string) error {
	return decodeValue(node, reflect.ValueOf(out).Elem(), path)
}

var (
	nodeType        = reflect.TypeFor[yaml.Node]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

func decodeValue(node *yaml.Node, v reflect.Value, path string) error {
	if node.Kind == yaml.AliasNode {
		node = node.Alias
	}
	t := v.Type()
	switch {
	case t == nodeType || reflect.PointerTo(t).Implements(unmarshalerType):
		return leaf(node, v, path)
	case t.Kind() == reflect.Pointer:
		if node.Tag == "!!null" {
			return nil
		}
		v.Set(reflect.New(t.Elem()))
		return decodeValue(node, v.Elem(), path)
	case t.Kind() == reflect.Struct && node.Kind == yaml.MappingNode:
		return decodeStruct(node, v, path)
	case t.Kind() == reflect.Slice && node.Kind == yaml.SequenceNode:
		v.Set(reflect.MakeSlice(t, len(node.Content), len(node.Content)))
		for i, item := range node.Content {
			if err := decodeValue(item, v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Slice:
		if node.Tag == "!!null" {
			return nil
		}
		return fmt.Errorf("%s: line %d: want a %s, got %s", path, node.Line, shape(t), node.Tag)
	default:
		return leaf(node, v, path)
	}
}

func decodeStruct(node *yaml.Node, v reflect.Value, path string) error {
	fields := map[string]int{}
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			fields[name] = i
		}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, val := node.Content[i], node.Content[i+1]
		fieldPath := join(path, key.Value)
		idx, ok := fields[key.Value]
		if !ok {
			return fmt.Errorf("%s: line %d: unknown field", fieldPath, key.Line)
		}
		if seen[key.Value] {
			return fmt.Errorf("%s: line %d: field given twice", fieldPath, key.Line)
		}
		seen[key.Value] = true
		if err := decodeValue(val, v.Field(idx), fieldPath); err != nil {
			return err
		}
	}
	return nil
}

func leaf(node *yaml.Node, v reflect.Value, path string) error {
	if err := node.Decode(v.Addr().Interface()); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n  ")
		return fmt.Errorf("%s: %s", path, msg)
	}
	return nil
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
