package arcimport

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrMerge marks a pools file the converted pools cannot be added to: it is
// not a pools file with a block `pools:` list last, or a converted pool's name
// is one of its pools'.
var ErrMerge = errors.New("cannot merge")

// Merge adds the converted pools of res to the pools file existing (named
// file in errors): existing's bytes are kept as they are, every pool and
// comment, and the converted pools, each with its comment naming its sources,
// are appended to its `pools:` list at that list's indentation. A converted
// pool named like an existing one is refused, naming both: the file would
// have two pools of one name, and renaming either is the operator's choice.
// The error wraps ErrMerge. The caller checks the result (Check).
func Merge(existing []byte, file string, res Result) ([]byte, error) {
	list, err := poolsList(existing, file)
	if err != nil {
		return nil, err
	}
	have := map[string]int{}
	for _, it := range list.Content {
		if n := get(it, "name"); n != nil {
			have[n.Value] = n.Line
		}
	}
	var clashes []error
	for i, name := range res.Names {
		if line, ok := have[name]; ok {
			clashes = append(clashes, fmt.Errorf("%w: pool %s converted from %s, and pool %s of %s (line %d): one name for two pools; "+
				"rename the ARC object (or the existing pool), then import again", ErrMerge, name, res.Origins[i], name, file, line))
		}
	}
	if len(clashes) > 0 {
		return nil, errors.Join(clashes...)
	}
	indent, err := itemIndent(existing, list, file)
	if err != nil {
		return nil, err
	}
	_, items, ok := bytes.Cut(res.Pools, []byte("\npools:\n"))
	if !ok {
		return nil, fmt.Errorf("%w: the converted pools have no pools: list", ErrMerge)
	}
	out := bytes.Clone(existing)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	for _, line := range strings.SplitAfter(string(items), "\n") {
		if rest, ok := strings.CutPrefix(line, "  "); ok {
			line = indent + rest
		}
		out = append(out, line...)
	}
	return out, nil
}

// poolsList is the `pools:` list of a pools file: a block sequence, the
// file's last key (what follows it in the file is appended to).
func poolsList(raw []byte, file string) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMerge, file, err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: %s is not a pools file (a mapping with a pools: list)", ErrMerge, file)
	}
	root := doc.Content[0]
	n := len(root.Content)
	if n < 2 || root.Content[n-2].Value != "pools" {
		return nil, fmt.Errorf("%w: %s: pools: is not its last key; the converted pools are appended to the file, so put it last", ErrMerge, file)
	}
	list := root.Content[n-1]
	if list.Kind != yaml.SequenceNode || list.Style&yaml.FlowStyle != 0 || len(list.Content) == 0 {
		return nil, fmt.Errorf("%w: %s: line %d: pools: is not a block list of pools (- name: ...)", ErrMerge, file, root.Content[n-2].Line)
	}
	return list, nil
}

// itemIndent is the indentation of the list's dashes, from its first item.
func itemIndent(raw []byte, list *yaml.Node, file string) (string, error) {
	first := list.Content[0]
	lines := strings.Split(string(raw), "\n")
	if first.Line < 1 || first.Line > len(lines) {
		return "", fmt.Errorf("%w: %s: cannot find the pools list's first item", ErrMerge, file)
	}
	line := lines[first.Line-1]
	dash := strings.LastIndex(line[:min(len(line), max(first.Column-1, 0))], "-")
	if dash < 0 || strings.TrimLeft(line[:dash], " ") != "" {
		return "", fmt.Errorf("%w: %s: line %d: the pools list's first item does not start with `- ` on its line", ErrMerge, file, first.Line)
	}
	return line[:dash], nil
}
