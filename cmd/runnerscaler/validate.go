package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolcheck"
)

const validateHelp = `usage: runnerscaler validate [-o table|json|yaml] [--kubeconfig FILE] [FILE]

Checks a pools file offline as the sweeper checks it when it starts (every
field, and the pod each pool's runners would run: its template with the docker
sidecar, the volumes and the volume claim templates added) and reports every
problem at once, as FILE:LINE:COLUMN: MESSAGE, with the field a misspelt one
was probably meant to be. FILE defaults to RUNNERSCALER_POOLS, then
./pools.yaml, then ./infra/pools.yaml. 'sam build' runs it (the Makefile's
build targets), so a file the sweeper would refuse never reaches AWS.

With --kubeconfig or --context (only then: otherwise it stays offline), it also
reads each pool's namespace on that cluster and checks the runner pod against
the Pod Security level the namespace enforces (its
pod-security.kubernetes.io/enforce label), as admission will: a docker pool in
a baseline namespace is refused here rather than at its first runner. It needs
get on namespaces.

Exit status: 0 the file is valid; 1 it is not (or cannot be read, or the
cluster cannot be read); 2 bad usage.`

// validation is validate's report, as -o json and -o yaml print it.
type validation struct {
	File     string           `json:"file"`
	Valid    bool             `json:"valid"`
	Problems []problemAtPlace `json:"problems"`
}

type problemAtPlace struct {
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

// errInvalid is a file with problems: the problems are the command's output, so
// Exit only sets the status.
type errInvalid struct{ count int }

func (e errInvalid) Error() string { return fmt.Sprintf("%d problems", e.count) }
func (e errInvalid) reported()     {}

// validateFlags are validate's settings.
type validateFlags struct {
	file                    string
	output                  *outputFormat
	kubeconfig, kubeContext string
}

func parseValidate(args []string, getenv func(string) string) (validateFlags, error) {
	var f validateFlags
	fs := newFlagSet("validate", validateHelp)
	f.output = fs.Output("table", "json", "yaml")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "also check each pool's namespace's Pod Security level on this cluster (none: offline)")
	fs.StringVar(&f.kubeContext, "context", "", "kubeconfig context for the Pod Security check (with no --kubeconfig: KUBECONFIG, then ~/.kube/config)")
	positional, err := fs.Parse(args)
	switch {
	case err != nil:
		return f, err
	case len(positional) > 1:
		return f, usagef("one FILE at most, got %q", positional)
	case len(positional) == 1:
		f.file = positional[0]
	}
	f.file, err = poolsFile(f.file, getenv, "FILE")
	return f, err
}

// validate is `runnerscaler validate`.
func validate(ctx context.Context, args []string, e env) error {
	f, err := parseValidate(args, e.getenv)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(f.file)
	if err != nil {
		return err
	}
	problems := poolcheck.Check(raw)
	if len(problems) == 0 && (f.kubeconfig != "" || f.kubeContext != "") {
		restCfg, err := loadKube(f.kubeconfig, f.kubeContext)
		if err != nil {
			return err
		}
		kc, err := kubernetes.NewForConfig(restCfg)
		if err != nil {
			return err
		}
		levels, err := namespaceLevels(ctx, kc, raw)
		if err != nil {
			return err
		}
		problems = poolcheck.PodSecurity(raw, levels)
	}
	report := validation{File: f.file, Valid: len(problems) == 0, Problems: []problemAtPlace{}}
	for _, p := range problems {
		report.Problems = append(report.Problems, problemAtPlace{Line: p.Line, Column: p.Column, Message: p.Brief()})
	}
	if err := f.output.Write(e.stdout, report, func() error { return printProblems(e.stdout, e.stderr, f.file, problems) }); err != nil {
		return err
	}
	if len(problems) > 0 {
		return errInvalid{len(problems)}
	}
	return nil
}

// namespaceLevels reads the Pod Security level each pool's namespace enforces
// (GET /api/v1/namespaces/{name}): its enforce label, or "privileged", the
// admission's default, without one. A namespace that does not exist is an
// error naming it: the runners could not be created there at all.
func namespaceLevels(ctx context.Context, kc kubernetes.Interface, raw []byte) (map[string]string, error) {
	cfg, err := pool.Parse(raw)
	if err != nil {
		return nil, err
	}
	levels := map[string]string{}
	for _, p := range cfg.Pools {
		name := p.Kubernetes.Namespace
		if _, done := levels[name]; done {
			continue
		}
		ns, err := kc.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading namespace %s (pool %s) for its Pod Security level: %w", name, p.Name, err)
		}
		levels[name] = cmp.Or(ns.Labels[poolcheck.EnforceLabel], "privileged")
	}
	return levels, nil
}

// printProblems writes each problem as FILE:LINE:COLUMN: MESSAGE on stderr, as
// compilers do, or that the file is valid on stdout.
func printProblems(stdout, stderr io.Writer, file string, problems []*pool.Problem) error {
	if len(problems) == 0 {
		_, err := fmt.Fprintf(stdout, "%s: valid\n", file)
		return err
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "%s:%d:%d: %s\n", file, max(p.Line, 1), max(p.Column, 1), p.Brief())
	}
	return nil
}

// loadPools loads the pools file for a command that uses it (status, drain);
// its problems are reported as validate reports them, one FILE:LINE:COLUMN:
// MESSAGE line each.
func loadPools(file string) (*pool.Config, error) {
	cfg, err := pool.Load(file)
	if err == nil {
		return cfg, nil
	}
	problems := pool.Problems(err)
	if len(problems) == 0 || problems[0].Line == 0 && len(problems) == 1 && problems[0].Where == "" {
		return nil, err // not a problem of the file's content (it cannot be read, say)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the pools file does not load (runnerscaler validate %s):", file)
	for _, p := range problems {
		fmt.Fprintf(&b, "\n%s:%d:%d: %s", file, max(p.Line, 1), max(p.Column, 1), p.Brief())
	}
	return nil, errors.New(b.String())
}
