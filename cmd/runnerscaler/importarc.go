package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/runnerscaler/runnerscaler/internal/arcimport"
	"github.com/runnerscaler/runnerscaler/internal/arcimport/dryrun"
	"github.com/runnerscaler/runnerscaler/internal/kube"
	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// Exit codes of import-arc.
const (
	exitConverted = 0 // every field carried
	exitFailed    = 1 // the API server refused a pool, or the cluster or the output could not be reached
	exitUsage     = 2 // bad usage, or input with nothing convertible (nothing written)
	exitDropped   = 3 // converted, with what was not carried listed on stderr
)

const importARCHelp = `usage: runnerscaler import-arc [flags] FILE|DIR|- ...

Converts actions-runner-controller (ARC) configurations into a pools file:
  - runner scale sets (ARC 0.4 and later): gha-runner-scale-set values files
    ('helm get values RELEASE -n NAMESPACE -o yaml') and AutoscalingRunnerSet
    objects (actions.github.com/v1alpha1; 'kubectl get autoscalingrunnersets -A -o yaml');
  - legacy ARC (v0.22-v0.27, actions.summerwind.dev/v1alpha1): RunnerDeployment,
    RunnerSet, Runner and HorizontalRunnerAutoscaler.
Multi-document YAML and 'kubectl get -o yaml' lists; a directory is read whole
(*.yaml, *.yml, *.json, recursively); - is stdin. Each autoscaler is paired with
its scaleTargetRef across all inputs. What is not carried is listed on stderr
with file, document, field path and what to do instead, and, with the notes,
as comments at the head of the YAML written (stdout or --out).

The pools go to stdout, to a new file (--out FILE: an existing file is never
overwritten), or are added to an existing pools file (--merge POOLS: its pools
and comments are kept byte for byte; a pool name it already has is refused).
What is written passes the sweeper's checks ('runnerscaler validate'), offline.
With --kubeconfig (or KUBECONFIG) the pools are also dry-run on the API server,
as the sweeper does (create on statefulsets in the pools' namespaces; nothing
is stored).

Exit status: 0 everything carried; 3 converted, with what was not carried
listed; 2 bad usage, or nothing in the input could be converted (why is listed;
nothing written); 1 the API server refused a pool, or a cluster or output error.`

// importFlags are import-arc's settings.
type importFlags struct {
	format                  *outputFormat
	out, merge              string
	kubeconfig, kubeContext string
	opts                    arcimport.Options
	inputs                  []string
}

// parseImport parses import-arc's command line; the errors are cli.go's (a
// usage error, or a help request). It writes nothing: the writer is unused.
func parseImport(args []string, getenv func(string) string, _ io.Writer) (importFlags, error) {
	var f importFlags
	fs := newFlagSet("import-arc", importARCHelp)
	f.format = fs.Output("yaml", "json")
	fs.StringVar(&f.out, "out", "", "write the pools to this new file (refused if it exists)")
	fs.StringVar(&f.merge, "merge", "", "add the pools to this existing pools file, keeping its pools and comments")
	fs.StringVar(&f.kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "dry-run the pools on this cluster (default KUBECONFIG; none: no dry run)")
	fs.StringVar(&f.kubeContext, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&f.opts.Namespace, "namespace", arcimport.DefaultNamespace, "runner namespace of pools without docker (infra/rbac.yaml)")
	fs.StringVar(&f.opts.DockerNamespace, "docker-namespace", arcimport.DefaultDockerNamespace, "runner namespace of pools with docker (infra/rbac-docker.yaml)")
	fs.StringVar(&f.opts.RunnerImage, "runner-image", "", "runnerscaler runner image (runner/Dockerfile) for every pool, instead of ARC's")
	fs.StringVar(&f.opts.Release, "release", "", "Helm release of a gha-runner-scale-set values file without runnerScaleSetName (the scale set's name)")
	inputs, err := fs.Parse(args)
	switch {
	case err != nil:
		return f, err
	case len(inputs) == 0:
		return f, usagef("name at least one FILE, DIR or - (stdin)")
	case f.out != "" && f.merge != "":
		return f, usagef("--out and --merge: give one (--out writes a new file, --merge adds to an existing one)")
	case f.merge != "" && f.format.String() != "yaml":
		return f, usagef("--merge adds to a YAML pools file: -o %s does not apply", f.format)
	}
	f.inputs = inputs
	return f, nil
}

// importARC is `runnerscaler import-arc`; it returns the exit status.
func importARC(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	f, err := parseImport(args, getenv, io.Discard)
	if err != nil {
		return Exit("import-arc", err, stdout, stderr)
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
			fmt.Fprintln(stderr, "runnerscaler import-arc: no ARC runner scale set, RunnerDeployment or RunnerSet in the input; nothing written")
			return exitUsage
		}
		fmt.Fprintln(stderr, "runnerscaler import-arc: no pool could be converted (why is listed above); nothing written")
		return exitUsage
	}
	if code := finishImport(ctx, f, res, stdout, stderr); code != exitConverted {
		return code
	}
	if len(res.Dropped) > 0 {
		fmt.Fprintf(stderr, "runnerscaler import-arc: %s converted; %s not carried (listed above, and as comments of the YAML written)\n",
			count(len(res.Names), "pool"), count(len(res.Dropped), "thing"))
		return exitDropped
	}
	return exitConverted
}

// finishImport makes the output (the pools, or the merged file), checks it as
// the sweeper would, writes it, and dry-runs the pools when a kubeconfig is
// given.
func finishImport(ctx context.Context, f importFlags, res arcimport.Result, stdout, stderr io.Writer) int {
	out, code := output(f, res, stderr)
	if code != exitConverted {
		return code
	}
	cfg, err := arcimport.Check(out)
	if err != nil {
		what := "the converted pools"
		if f.merge != "" {
			what = f.merge + " with the converted pools"
		}
		fmt.Fprintf(stderr, "runnerscaler import-arc: %s would not pass the sweeper's checks; nothing written: %v\n", what, err)
		return exitUsage
	}
	if err := write(f, out, stdout); err != nil {
		fmt.Fprintln(stderr, "runnerscaler import-arc:", err)
		return exitFailed
	}
	if f.merge != "" {
		fmt.Fprintf(stderr, "runnerscaler import-arc: added pools %s to %s\n", strings.Join(res.Names, ", "), f.merge)
	}
	if f.kubeconfig == "" {
		fmt.Fprintln(stderr, "runnerscaler import-arc: no --kubeconfig or KUBECONFIG: the pools were not dry-run on a cluster")
		return exitConverted
	}
	if err := admit(ctx, f, cfg); err != nil {
		fmt.Fprintln(stderr, "runnerscaler import-arc:", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "runnerscaler import-arc: the API server admits the runners of every pool, %s (dry run)\n", count(len(cfg.Pools), "pool"))
	return exitConverted
}

// output is what import-arc writes: the pools file (YAML, or JSON without its
// comments), or the merged file.
func output(f importFlags, res arcimport.Result, stderr io.Writer) ([]byte, int) {
	if f.merge != "" {
		existing, err := os.ReadFile(f.merge)
		if err != nil {
			fmt.Fprintln(stderr, "runnerscaler import-arc: --merge:", err)
			return nil, exitUsage
		}
		if _, err := arcimport.Check(existing); err != nil {
			fmt.Fprintf(stderr, "runnerscaler import-arc: --merge %s: the file does not pass the sweeper's checks as it is (runnerscaler validate %s); nothing written: %v\n", f.merge, f.merge, err)
			return nil, exitUsage
		}
		merged, err := arcimport.Merge(existing, f.merge, res)
		if err != nil {
			fmt.Fprintf(stderr, "runnerscaler import-arc: --merge: %v\nnothing written\n", err)
			return nil, exitUsage
		}
		return merged, exitConverted
	}
	if f.format.String() != "json" {
		return append(reportComments(res), res.Pools...), exitConverted
	}
	raw, err := yaml.YAMLToJSON(res.Pools)
	if err != nil {
		fmt.Fprintln(stderr, "runnerscaler import-arc: writing JSON:", err)
		return nil, exitFailed
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		fmt.Fprintln(stderr, "runnerscaler import-arc: writing JSON:", err)
		return nil, exitFailed
	}
	b.WriteByte('\n')
	return b.Bytes(), exitConverted
}

// write writes out to stdout, to the new file --out (never over an existing
// one), or over the --merge file (through a temporary file in its directory,
// renamed over it, so a failed write leaves it as it was).
func write(f importFlags, out []byte, stdout io.Writer) error {
	switch {
	case f.out != "":
		file, err := os.OpenFile(f.out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("--out %s: the file exists, and import-arc never overwrites a pools file (a pool missing from it would be drained): "+
				"add the pools to it with --merge %s, or name a new file", f.out, f.out)
		}
		if err != nil {
			return fmt.Errorf("writing pools file: %w", err)
		}
		if _, err := file.Write(out); err != nil {
			_ = file.Close()
			return fmt.Errorf("writing pools file: %w", err)
		}
		return file.Close()
	case f.merge != "":
		return replaceFile(f.merge, out)
	}
	_, err := stdout.Write(out)
	return err
}

// replaceFile writes data over path through a temporary file renamed over it,
// keeping path's permissions.
func replaceFile(path string, data []byte) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("--merge: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("--merge: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("--merge: writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(info.Mode().Perm()); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("--merge: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("--merge: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("--merge: %w", err)
	}
	return nil
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

// reportComments is what the import did not carry, and its notes, as YAML
// comments that head the pools file it writes, so that a file written with
// --out keeps them for its review; nothing when there are none.
func reportComments(res arcimport.Result) []byte {
	var b bytes.Buffer
	comment := func(prefix, text string) {
		b.WriteString("# " + prefix + strings.ReplaceAll(text, "\n", "\n#   ") + "\n")
	}
	for _, d := range res.Dropped {
		comment("not carried: ", d.String())
	}
	for _, n := range res.Notes {
		comment("note: ", n)
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.Bytes()
}

func report(w io.Writer, res arcimport.Result) {
	for _, d := range res.Dropped {
		fmt.Fprintln(w, "not carried:", d)
	}
	for _, n := range res.Notes {
		fmt.Fprintln(w, "note:", n)
	}
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

// count is n and the noun, plural unless n is 1: "1 pool", "2 pools".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
