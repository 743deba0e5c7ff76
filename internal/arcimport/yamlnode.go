package arcimport

import (
	"fmt"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// get is the value of key in mapping m, or nil.
func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// pairs calls f with each key and value of mapping m, in order.
func pairs(m *yaml.Node, f func(key string, val *yaml.Node)) {
	if m == nil || m.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		f(m.Content[i].Value, m.Content[i+1])
	}
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// scalar is a scalar's value, or "" (null, absent or not a scalar).
func scalar(n *yaml.Node) string {
	if isNull(n) || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// clean copies n without its comments, style or positions.
func clean(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.AliasNode {
		return clean(n.Alias)
	}
	out := &yaml.Node{Kind: n.Kind, Tag: n.Tag, Value: n.Value}
	if n.Kind == yaml.ScalarNode && (n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle)) != 0 {
		out.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		out.Content = append(out.Content, clean(c))
	}
	return out
}

func str(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
}

func num(v int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
}

func boolean(v bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
}

func seq(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Content: items}
}

// omap is a mapping under construction: keys in insertion order, a later set
// of a key replacing its value in place.
type omap struct {
	keys []string
	vals map[string]*yaml.Node
}

func (m *omap) set(key string, v *yaml.Node) {
	if m.vals == nil {
		m.vals = map[string]*yaml.Node{}
	}
	if _, ok := m.vals[key]; !ok {
		m.keys = append(m.keys, key)
	}
	m.vals[key] = v
}

func (m *omap) get(key string) *yaml.Node { return m.vals[key] }

func (m *omap) empty() bool { return len(m.keys) == 0 }

// appendSeq appends items to the sequence at key, creating it.
func (m *omap) appendSeq(key string, items ...*yaml.Node) {
	cur := m.get(key)
	if cur == nil || cur.Kind != yaml.SequenceNode {
		cur = seq()
		m.set(key, cur)
	}
	cur.Content = append(cur.Content, items...)
}

func (m *omap) node() *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range m.keys {
		n.Content = append(n.Content, str(k), m.vals[k])
	}
	return n
}

// fromMapping is an omap holding a clean copy of mapping n.
func fromMapping(n *yaml.Node) *omap {
	m := &omap{}
	pairs(n, func(k string, v *yaml.Node) { m.set(k, clean(v)) })
	return m
}

// duplicateKey finds a key written twice in one mapping of n. A YAML decoder
// keeps only one of the two values (the API server the last), so a repeated
// key — a second tolerations, a second dockerEnabled — silently drops the
// first; the import refuses it instead, naming both lines.
func duplicateKey(n *yaml.Node) error {
	if n == nil || n.Kind == yaml.AliasNode {
		return nil
	}
	if n.Kind == yaml.MappingNode {
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Value == "<<" {
				continue
			}
			if line, dup := seen[k.Value]; dup {
				return fmt.Errorf("line %d: key %q repeats the key of line %d: YAML keeps only one of the two values (the API server the last), so the other is lost; merge them into one",
					k.Line, k.Value, line)
			}
			seen[k.Value] = k.Line
		}
	}
	for _, c := range n.Content {
		if err := duplicateKey(c); err != nil {
			return err
		}
	}
	return nil
}

// filterSeq removes from the sequence at key the items named one of names.
func (m *omap) filterSeq(key string, names []string) {
	cur := m.get(key)
	if cur == nil || cur.Kind != yaml.SequenceNode {
		return
	}
	var kept []*yaml.Node
	for _, it := range cur.Content {
		if !slices.Contains(names, scalar(get(it, "name"))) {
			kept = append(kept, it)
		}
	}
	cur.Content = kept
}

// without removes from the sequence at key the items named one of names, and
// the key once nothing is left.
func (m *omap) without(key string, names ...string) {
	m.filterSeq(key, names)
	if cur := m.get(key); cur != nil && len(cur.Content) == 0 {
		delete(m.vals, key)
		m.keys = slices.DeleteFunc(m.keys, func(k string) bool { return k == key })
	}
}
