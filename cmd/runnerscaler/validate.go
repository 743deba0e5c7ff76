package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
a baseline namespace is refused here rather than at its first runner. For
container mode pools it also checks that a kubernetes pool's workVolumeClaim
names a StorageClass the cluster has (or, with none named, that the cluster has
a default one) and that a kubernetes-novolume pool's jobsNamespace exists. It
needs get on namespaces and list on storageclasses.

Warnings (FILE:LINE:COLUMN: warning: MESSAGE) are settings the sweeper accepts
but that likely break the pool's jobs, such as hookTemplate keys that replace
what the container hooks need; they do not make the file invalid.

Exit status: 0 the file is valid (with or without warnings); 1 it is not (or
cannot be read, or the cluster cannot be read); 2 bad usage.`

// validation is validate's report, as -o json and -o yaml print it.
type validation struct {
	File     string           `json:"file"`
	Valid    bool             `json:"valid"`
	Problems []problemAtPlace `json:"problems"`
	// Warnings do not make the file invalid (poolcheck.Warnings).
	Warnings []problemAtPlace `json:"warnings"`
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
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "also check each pool's namespace's Pod Security level, and container mode pools' storage class and jobs namespace, on this cluster (none: offline)")
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
		cluster, err := readCluster(ctx, kc, raw)
		if err != nil {
			return err
		}
		problems = append(poolcheck.PodSecurity(raw, levels), poolcheck.ClusterProblems(raw, cluster)...)
		slices.SortStableFunc(problems, func(a, b *pool.Problem) int {
			return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
		})
	}
	warnings := poolcheck.Warnings(raw)
	report := validation{File: f.file, Valid: len(problems) == 0, Problems: placed(problems), Warnings: placed(warnings)}
	if err := f.output.Write(e.stdout, report, func() error { return printProblems(e.stdout, e.stderr, f.file, problems, warnings) }); err != nil {
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

// placed is the report's form of problems.
func placed(problems []*pool.Problem) []problemAtPlace {
	out := []problemAtPlace{}
	for _, p := range problems {
		out = append(out, problemAtPlace{Line: p.Line, Column: p.Column, Message: p.Brief()})
	}
	return out
}

// readCluster reads what the container mode checks need (poolcheck.Cluster):
// the StorageClasses (GET /apis/storage.k8s.io/v1/storageclasses) when a pool
// is in kubernetes mode, and whether each kubernetes-novolume pool's jobs
// namespace exists (GET /api/v1/namespaces/{name}).
func readCluster(ctx context.Context, kc kubernetes.Interface, raw []byte) (poolcheck.Cluster, error) {
	c := poolcheck.Cluster{StorageClasses: map[string]bool{}, Namespaces: map[string]bool{}}
	cfg, err := pool.Parse(raw)
	if err != nil {
		return c, err
	}
	if poolcheck.NeedsStorageClasses(cfg) {
		classes, err := kc.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return c, fmt.Errorf("listing StorageClasses for the kubernetes mode pools' work volume claims: %w", err)
		}
		for _, sc := range classes.Items {
			c.StorageClasses[sc.Name] = sc.Annotations[defaultClassAnnotation] == "true" || sc.Annotations[betaDefaultClassAnnotation] == "true"
		}
	}
	for _, name := range poolcheck.JobsNamespaces(cfg) {
		_, err := kc.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return c, fmt.Errorf("reading jobs namespace %s: %w", name, err)
		default:
			c.Namespaces[name] = true
		}
	}
	return c, nil
}

// The annotations that make a StorageClass the cluster's default (the
// DefaultStorageClass admission plugin reads both).
const (
	defaultClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaDefaultClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

// printProblems writes each problem as FILE:LINE:COLUMN: MESSAGE and each
// warning as FILE:LINE:COLUMN: warning: MESSAGE on stderr, as compilers do, or
// that the file is valid (and how many warnings it has) on stdout.
func printProblems(stdout, stderr io.Writer, file string, problems, warnings []*pool.Problem) error {
	for _, w := range warnings {
		fmt.Fprintf(stderr, "%s:%d:%d: warning: %s\n", file, max(w.Line, 1), max(w.Column, 1), w.Brief())
	}
	if len(problems) == 0 {
		var err error
		switch len(warnings) {
		case 0:
			_, err = fmt.Fprintf(stdout, "%s: valid\n", file)
		case 1:
			_, err = fmt.Fprintf(stdout, "%s: valid, 1 warning\n", file)
		default:
			_, err = fmt.Fprintf(stdout, "%s: valid, %d warnings\n", file, len(warnings))
		}
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
