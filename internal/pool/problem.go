package pool

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Problem is one error in a pools file, with the position of the YAML node it
// is about: the field itself, or the nearest enclosing one that is in the file
// (a required field that is missing is reported at its pool).
type Problem struct {
	// Line and Column are 1-based; 0 when the error is about the whole file.
	Line, Column int
	// Where names the field from the file's root, e.g. `pools[0].maxReplica`,
	// or the pool, e.g. `pools[0] (linux)`, when Message begins with the field.
	Where string
	// Message says what is wrong.
	Message string
	// showLine: the error text says the line, as decoding errors always have.
	showLine bool
	// suggestion is the field an unknown field was probably meant to be.
	suggestion string
	// path is the field's path from the root (Path).
	path string
}

// NewProblem returns a problem at node about the field at path (from the
// file's root) of the pool named in where, e.g. `pools[0] (linux)`; message
// begins with the field's path from the pool, as the pool's own checks' do.
func NewProblem(node *yaml.Node, where, path, message string) *Problem {
	return &Problem{Line: node.Line, Column: node.Column, Where: where, Message: message, path: path}
}

// Path is the path from the file's root of the field the problem is about,
// e.g. `pools[0].kubernetes.template`; "" for the whole file.
func (p *Problem) Path() string { return p.path }

// Error is the problem as Parse has always reported it: the path, the line
// of a decoding error, and the message.
func (p *Problem) Error() string {
	switch {
	case p.Where == "":
		return p.Message
	case p.showLine:
		return fmt.Sprintf("%s: line %d: %s", p.Where, p.Line, p.Message)
	}
	return p.Where + ": " + p.Message
}

// Brief is the problem without its position, for a `file:line:col: ` prefix.
func (p *Problem) Brief() string {
	if p.Where == "" {
		return p.Message
	}
	return p.Where + ": " + p.Message
}

// Problems lists the problems in err (an error from Parse, Load or Check), in
// the file's order as found; an error that is not a Problem is one at line 0.
func Problems(err error) []*Problem {
	if err == nil {
		return nil
	}
	var out []*Problem
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			out = append(out, Problems(e)...)
		}
		return out
	}
	if p, ok := err.(*Problem); ok {
		return []*Problem{p}
	}
	if _, ok := errors.AsType[*Problem](err); ok {
		return Problems(errors.Unwrap(err)) // Load's "pools config FILE: " around Parse's
	}
	return []*Problem{{Message: err.Error()}}
}

// Locate returns the node of the field at path under n (a mapping), e.g.
// `kubernetes.template.spec.containers[0].image`, for its position: a field's
// key (where it starts), or a list's item. ok is false when the path is not all
// there; the node is then that of the longest prefix that is (n itself if none).
func Locate(n *yaml.Node, path string) (at *yaml.Node, ok bool) {
	at = n
	for _, step := range steps(path) {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		key, value := child(n, step)
		if value == nil {
			return at, false
		}
		at, n = key, value
	}
	return at, true
}

var index = regexp.MustCompile(`^\[(\d+)\]$`)

// steps splits `a.b[2].c` into a, b, [2], c.
func steps(path string) []string {
	var out []string
	for part := range strings.SplitSeq(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, name)
		}
		if rest != "" {
			for i := range strings.SplitSeq(rest, "[") {
				out = append(out, "["+i)
			}
		}
	}
	return out
}

// child returns the key (for positions) and the value of step in n: a mapping's
// field, or a list's [i] (whose key is the item itself).
func child(n *yaml.Node, step string) (key, value *yaml.Node) {
	if m := index.FindStringSubmatch(step); m != nil {
		i, _ := strconv.Atoi(m[1])
		if n.Kind == yaml.SequenceNode && i < len(n.Content) {
			return n.Content[i], n.Content[i]
		}
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == step {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}
