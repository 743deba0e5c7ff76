package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/arcimport"
	"github.com/runnerscaler/runnerscaler/internal/arcimport/dryrun"
	"github.com/runnerscaler/runnerscaler/internal/kube"
	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// Exit codes of import-arc.
const (
	exitConverted = 0 // every field carried
	exitFailed    = 1 // the API server refused a pool, or the cluster or the output could not be reached
	exitUsage     = 2 // bad flags, unreadable input, or no ARC object in it
	exitDropped   = 3 // converted, with fields listed on stderr as not carried
)

const importARCUsage = `usage: runnerscaler import-arc [flags] FILE|DIR|- ...

Converts actions-runner-controller manifests (actions.summerwind.dev/v1alpha1:
RunnerDeployment, RunnerSet, Runner, HorizontalRunnerAutoscaler; multi-document
YAML and 'kubectl get -o yaml' lists) into a pools file. A directory is read
whole (*.yaml, *.yml, *.json, recursively); - is stdin. Each autoscaler is paired
with its scaleTargetRef across all inputs. What is not carried is listed on
stderr with file, document, field path and what to do instead.

With -kubeconfig (or KUBECONFIG) the pools are also checked by the API server in
a dry run, as the sweeper does (it needs create on statefulsets in the pools'
namespaces; nothing is stored).

Exit status: 0 every field carried; 3 converted, with fields not carried (listed);
2 bad usage or input; 1 the API server refused a pool, or a cluster or output error.

flags:
`

// importFlags are import-arc's settings.
type importFlags struct {
	output, kubeconfig, kubeContext string
	opts                            arcimport.Options
	inputs                          []string
}

func parseImport(args []string, getenv func(string) string, stderr io.Writer) (importFlags, error) {
	var f importFlags
	fs := flag.NewFlagSet("import-arc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.output, "o", "-", "write the pools file here (- is stdout)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "dry-run the pools on this cluster (default KUBECONFIG; none: no dry run)")
	fs.StringVar(&f.kubeContext, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&f.opts.Namespace, "namespace", arcimport.DefaultNamespace, "runner namespace of pools without docker (infra/rbac.yaml)")
	fs.StringVar(&f.opts.DockerNamespace, "docker-namespace", arcimport.DefaultDockerNamespace, "runner namespace of pools with docker (infra/rbac-docker.yaml)")
	fs.StringVar(&f.opts.RunnerImage, "runner-image", "", "runnerscaler runner image (runner/Dockerfile) for every pool, instead of ARC's")
	fs.Usage = func() {
		fmt.Fprint(stderr, importARCUsage)
		fs.PrintDefaults()
	}
	for {
		if err := fs.Parse(args); err != nil {
			return f, err
		}
		if fs.NArg() == 0 {
			break
		}
		f.inputs, args = append(f.inputs, fs.Arg(0)), fs.Args()[1:]
	}
	if len(f.inputs) == 0 {
		fs.Usage()
		return f, errors.New("name at least one FILE, DIR or -")
	}
	return f, nil
}

// importARC is `runnerscaler import-arc`; it returns the exit status.
func importARC(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	f, err := parseImport(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitConverted
	}
	if err != nil {
		fmt.Fprintln(stderr, "runnerscaler import-arc:", err)
		return exitUsage
	}
	sources, err := readSources(f.inputs, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "runnerscaler import-arc:", err)
		return exitUsage
	}
	res, err := arcimport.Convert(sources, f.opts)
	if err != nil {
		fmt.Fprintln(stderr, "runnerscaler import-arc:", err)
		return exitUsage
	}
	report(stderr, res)
	if res.Pools == nil {
		if len(res.Dropped) == 0 {
			fmt.Fprintln(stderr, "runnerscaler import-arc: no ARC RunnerDeployment or RunnerSet in the input")
			return exitUsage
		}
		fmt.Fprintln(stderr, "runnerscaler import-arc: no pool could be converted (see above); nothing written")
		return exitDropped
	}
	if code := finishImport(ctx, f, res, stdout, stderr); code != exitConverted {
		return code
	}
	if len(res.Dropped) > 0 {
		fmt.Fprintf(stderr, "runnerscaler import-arc: %d pools converted; %d things not carried (listed above)\n", len(res.Names), len(res.Dropped))
		return exitDropped
	}
	return exitConverted
}

// finishImport checks that the pools load, writes them, and dry-runs them when
// a kubeconfig is given.
func finishImport(ctx context.Context, f importFlags, res arcimport.Result, stdout, stderr io.Writer) int {
	cfg, err := pool.Parse(res.Pools)
	if err != nil {
		fmt.Fprintln(stderr, "runnerscaler import-arc: the converted pools do not load (please report this):", err)
		return exitFailed
	}
	if err := writeOutput(f.output, res.Pools, stdout); err != nil {
		fmt.Fprintln(stderr, "runnerscaler import-arc:", err)
		return exitFailed
	}
	if f.kubeconfig == "" {
		fmt.Fprintln(stderr, "runnerscaler import-arc: no -kubeconfig or KUBECONFIG: the pools were not dry-run on a cluster")
		return exitConverted
	}
	if err := admit(ctx, f, cfg); err != nil {
		fmt.Fprintln(stderr, "runnerscaler import-arc:", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "runnerscaler import-arc: the API server admits the runners of all %d pools (dry run)\n", len(cfg.Pools))
	return exitConverted
}

func admit(ctx context.Context, f importFlags, cfg *pool.Config) error {
	restCfg, err := kube.FromOperatorKubeconfig(f.kubeconfig, f.kubeContext)
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	return dryrun.Check(ctx, kc, cfg, clock.RealClock{}.Now())
}

func report(w io.Writer, res arcimport.Result) {
	for _, d := range res.Dropped {
		fmt.Fprintln(w, "not carried:", d)
	}
	for _, n := range res.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func writeOutput(path string, data []byte, stdout io.Writer) error {
	if path == "-" {
		_, err := stdout.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing pools file: %w", err)
	}
	return nil
}

// readSources reads each input: a file, every manifest under a directory (in
// lexical order), or stdin for "-".
func readSources(inputs []string, stdin io.Reader) ([]arcimport.Source, error) {
	var out []arcimport.Source
	for _, in := range inputs {
		if in == "-" {
			raw, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("reading stdin: %w", err)
			}
			out = append(out, arcimport.Source{Name: "stdin", Data: raw})
			continue
		}
		files, err := manifestFiles(in)
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			raw, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", file, err)
			}
			out = append(out, arcimport.Source{Name: file, Data: raw})
		}
	}
	return out, nil
}

func manifestFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		ext := strings.ToLower(filepath.Ext(p))
		if !d.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", path, err)
	}
	slices.Sort(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json file", path)
	}
	return files, nil
}
