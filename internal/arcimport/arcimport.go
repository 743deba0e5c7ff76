package arcimport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Source is one input: a file's name (or "-" for stdin) and its bytes.
type Source struct {
	Name string
	Data []byte
}

// Options tune the conversion.
type Options struct {
	// Namespace is where pools without docker run their runners (default
	// DefaultNamespace). ARC's metadata.namespace is not used: it holds ARC's
	// own objects, and a runner namespace is dedicated to runnerscaler's runners.
	Namespace string
	// DockerNamespace is where pools with docker (a privileged container) run
	// their runners (default DefaultDockerNamespace).
	DockerNamespace string
	// RunnerImage, when set, replaces ARC's runner image in every pool. ARC's
	// images lack runnerscaler's entrypoint; without it each image is reported.
	RunnerImage string
	// Release is the Helm release of a gha-runner-scale-set values file that
	// does not set runnerScaleSetName: ARC names the scale set after it.
	Release string
}

// Default namespaces: those of infra/rbac.yaml and infra/rbac-docker.yaml.
const (
	DefaultNamespace       = "actions-runners"
	DefaultDockerNamespace = "actions-runners-docker"
)

// Dropped is something of the input that the pools file does not carry.
type Dropped struct {
	File string
	// Document is the document's number in File, from 1.
	Document int
	// Path is the field's path in the document, e.g.
	// `spec.template.spec.containerMode` or `items[1].spec.metrics[0]`; empty
	// for a whole document.
	Path    string
	Reason  string
	Instead string
}

// String renders d as one line: `FILE: document N: PATH: REASON; instead: INSTEAD`.
func (d Dropped) String() string {
	where := fmt.Sprintf("%s: document %d", d.File, d.Document)
	if d.Path != "" {
		where += ": " + d.Path
	}
	return fmt.Sprintf("%s: %s; instead: %s", where, d.Reason, d.Instead)
}

// Result is a conversion's outcome.
type Result struct {
	// Pools is the pools file; nil when no pool could be converted.
	Pools []byte
	// Names are the pools' names, in the file's order.
	Names []string
	// Origins say where each pool comes from ("FILE, document N:
	// Kind/name"), in the order of Names.
	Origins []string
	// Dropped lists what was not carried, in input order.
	Dropped []Dropped
	// Notes say what was carried in another form (a pool name derived or
	// shortened, a namespace replaced, a number written as a string).
	Notes []string
}

// ErrInput marks input that is not YAML objects (a syntax error, a document
// that is not a mapping): nothing can be converted from it.
var ErrInput = errors.New("bad input")

// Convert converts the ARC objects of sources into one pools file. A
// HorizontalRunnerAutoscaler is paired with its target across all sources.
// The error wraps ErrInput when a source is not YAML objects.
func Convert(sources []Source, opts Options) (Result, error) {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.DockerNamespace == "" {
		opts.DockerNamespace = DefaultDockerNamespace
	}
	c := &converter{opts: opts}
	var objs []*object
	for _, src := range sources {
		o, err := read(src)
		if err != nil {
			return Result{}, err
		}
		objs = append(objs, o...)
	}
	drafts := c.convert(objs)
	names(c, drafts)
	hookAccounts(c, drafts)
	drafts, err := c.checked(drafts)
	if err != nil {
		return Result{}, err
	}
	slices.SortFunc(drafts, func(a, b *draft) int { return strings.Compare(a.name, b.name) })
	slices.SortStableFunc(c.dropped, func(a, b Dropped) int {
		if a.File != b.File {
			return strings.Compare(a.File, b.File)
		}
		return a.Document - b.Document
	})
	res := Result{Dropped: c.dropped, Notes: c.notes}
	if len(drafts) == 0 {
		return res, nil
	}
	out, err := render(drafts)
	if err != nil {
		return Result{}, err
	}
	res.Pools = out
	for _, d := range drafts {
		res.Names = append(res.Names, d.name)
		res.Origins = append(res.Origins, fmt.Sprintf("%s, document %d: %s", d.src.file, d.src.doc, d.src.ref()))
	}
	return res, nil
}

// object is one Kubernetes object of the input.
type object struct {
	file string
	doc  int
	// at is the path of the object in its document ("" or "items[N].").
	at         string
	apiVersion string
	kind       string
	name       string
	namespace  string
	node       *yaml.Node // the object's mapping
}

// path is the path of a field of the object in its document.
func (o *object) path(field string) string { return o.at + field }

// ref names the object as `Kind/name` (`Kind` when it has no name).
func (o *object) ref() string {
	if o.kind == kindValues {
		return o.kind
	}
	if o.name == "" {
		return o.kind + " (no metadata.name)"
	}
	return o.kind + "/" + o.name
}

// read decodes every document of src and flattens `kind: List` documents.
func read(src Source) ([]*object, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src.Data))
	var objs []*object
	for doc := 1; ; doc++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: document %d: %w", ErrInput, src.Name, doc, err)
		}
		root := &n
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		if isNull(root) {
			continue
		}
		if err := duplicateKey(root); err != nil {
			return nil, fmt.Errorf("%w: %s: document %d: %w", ErrInput, src.Name, doc, err)
		}
		if root.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%w: %s: document %d: line %d: not a Kubernetes object (a mapping)", ErrInput, src.Name, doc, root.Line)
		}
		o := newObject(src.Name, doc, "", root)
		if o.kind != "List" || (o.apiVersion != "v1" && o.apiVersion != "") {
			objs = append(objs, o)
			continue
		}
		items := get(root, "items")
		if items == nil || items.Kind != yaml.SequenceNode {
			continue
		}
		for i, it := range items.Content {
			if it.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("%w: %s: document %d: items[%d]: not a Kubernetes object (a mapping)", ErrInput, src.Name, doc, i)
			}
			objs = append(objs, newObject(src.Name, doc, fmt.Sprintf("items[%d].", i), it))
		}
	}
}

func newObject(file string, doc int, at string, n *yaml.Node) *object {
	o := &object{file: file, doc: doc, at: at, node: n,
		apiVersion: scalar(get(n, "apiVersion")), kind: scalar(get(n, "kind"))}
	if md := get(n, "metadata"); md != nil {
		o.name, o.namespace = scalar(get(md, "name")), scalar(get(md, "namespace"))
	}
	return o
}
