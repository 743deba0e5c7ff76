// Package poolcheck checks a pools file offline as the sweeper checks it when it
// starts — package pool's checks of every field, then each pool's pod template
// and volume claim templates (package runnerpod) — and reports every problem at
// once, each at its line and column, with a "did you mean" for a misspelt field.
// It is what `runnerscaler validate` and the Makefile's build targets run, so a
// file the sweeper would refuse never reaches AWS.
//
// Beyond the sweeper's checks, it refuses a docker-in-docker image in a container
// mode pool (containermode.go) and warns (Warnings, which do not make a file
// invalid) where a hook template replaces what the container hooks need. With a
// cluster read (Cluster, PodSecurity), it checks what only the cluster can tell:
// the namespaces' Pod Security levels, the storage classes of kubernetes mode
// work volumes and the jobs namespaces.
//
// What a file cannot tell is otherwise left to the sweeper's start: the
// credentials' reach, and the API server's own dry run of each template.
package poolcheck

import (
	"cmp"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/suggest"
)

// Check returns the problems of the pools file raw, ordered by position: those
// the sweeper would refuse it for, and a docker-in-docker image in container mode.
func Check(raw []byte) []*pool.Problem {
	cfg, root, problems := pool.ParseAll(raw)
	if cfg == nil {
		return problems
	}
	for i := range cfg.Pools {
		prefix := fmt.Sprintf("pools[%d]", i)
		if podFieldsFailed(problems, prefix) {
			continue // the template checks would only say it again
		}
		at, _ := pool.Locate(root, prefix)
		for _, p := range templateProblems(&cfg.Pools[i], at, prefix) {
			if !slices.ContainsFunc(problems, func(q *pool.Problem) bool { return q.Path() == p.Path() }) {
				problems = append(problems, p) // a field the pool's checks did not report already (a required work volume claim)
			}
		}
		problems = append(problems, dindImageProblems(&cfg.Pools[i], at, prefix)...)
	}
	sortByPosition(problems)
	return problems
}

// sortByPosition orders problems as they appear in the file.
func sortByPosition(problems []*pool.Problem) {
	slices.SortStableFunc(problems, func(a, b *pool.Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
}

// podFieldsFailed: a field that runnerpod reads to build the pool's pod failed
// to decode or its own check, so the template's checks have nothing sound to read.
func podFieldsFailed(problems []*pool.Problem, prefix string) bool {
	return slices.ContainsFunc(problems, func(p *pool.Problem) bool {
		rel, ok := strings.CutPrefix(p.Path(), prefix+".")
		return ok && (rel == "kubernetes" || rel == "name" || strings.HasPrefix(rel, "kubernetes.template") ||
			strings.HasPrefix(rel, "kubernetes.volumeClaimTemplates") || strings.HasPrefix(rel, "kubernetes.image") ||
			strings.HasPrefix(rel, "kubernetes.containerMode"))
	})
}

var (
	// unknownField is the API machinery's strict decoder's report, one per field.
	unknownField = regexp.MustCompile(`(unknown|duplicate) field "([^"]+)"`)
	// templatePath: the template's checks begin with the field's path in it.
	templatePath = regexp.MustCompile(`^(spec|metadata)[.\[]`)
)

// templateProblems runs runnerpod's checks of the pool (at is its node) and
// places each error at the field it names.
func templateProblems(p *pool.Pool, at *yaml.Node, prefix string) []*pool.Problem {
	err := runnerpod.ValidatePool(p)
	if err == nil {
		return nil
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	var out []*pool.Problem
	for _, err := range errs {
		out = append(out, templateProblem(err, p, at, prefix)...)
	}
	return out
}

// templateProblem places one error of runnerpod's checks.
func templateProblem(err error, p *pool.Pool, at *yaml.Node, prefix string) []*pool.Problem {
	where := fmt.Sprintf("%s (%s)", prefix, p.Name)
	msg := strings.TrimPrefix(err.Error(), "pool "+p.Name+": ")
	field, rest, _ := strings.Cut(msg, ": ")
	if field == "kubernetes.template" || field == "kubernetes.hookTemplate" {
		if matches := unknownField.FindAllStringSubmatch(rest, -1); matches != nil {
			var out []*pool.Problem
			for _, m := range matches {
				out = append(out, templateField(at, where, prefix, field+"."+m[2], m[1]+" field"))
			}
			return out
		}
		if inner, detail, ok := strings.Cut(rest, ": "); ok && templatePath.MatchString(inner) {
			n, _ := pool.Locate(at, field+"."+inner)
			return []*pool.Problem{pool.NewProblem(n, where, prefix+"."+field+"."+inner, field+"."+inner+": "+detail)}
		}
	}
	n, _ := pool.Locate(at, field)
	return []*pool.Problem{pool.NewProblem(n, where, prefix+"."+field, msg)}
}

// templateField is the problem of one unknown (or duplicate) field of a pod
// template (field: kubernetes.template. or kubernetes.hookTemplate. and its path
// in the template), with the field of the pod template it was probably meant to be.
func templateField(at *yaml.Node, where, prefix, field, what string) *pool.Problem {
	path := field[strings.Index(field, "emplate.")+len("emplate."):]
	n, _ := pool.Locate(at, field)
	msg := field + ": " + what
	if what == "unknown field" {
		if s := suggest.Closest(last(path), podFields(path)); s != "" {
			msg += "; did you mean " + s + "?"
		}
	}
	return pool.NewProblem(n, where, prefix+"."+field, msg)
}

// last is the path's last field name: `resource` of `spec.containers[0].resource`.
func last(path string) string {
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[i+1:]
	}
	return path
}

// podFields lists the fields a pod template takes beside the last one of path,
// by the Kubernetes types' JSON names.
func podFields(path string) []string {
	t := reflect.TypeFor[corev1.PodTemplateSpec]()
	parts := strings.Split(path, ".")
	for _, part := range parts[:len(parts)-1] {
		name, _, _ := strings.Cut(part, "[")
		f, ok := jsonField(t, name)
		if !ok {
			return nil
		}
		t = f.Type
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
	}
	return jsonNames(t)
}

func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == name:
			return f, true
		case tag == "" && f.Anonymous:
			if inner, ok := jsonField(f.Type, name); ok {
				return inner, true
			}
		}
	}
	return reflect.StructField{}, false
}

func jsonNames(t reflect.Type) []string {
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "" && f.Anonymous:
			names = append(names, jsonNames(f.Type)...)
		case tag != "" && tag != "-":
			names = append(names, tag)
		}
	}
	return names
}
