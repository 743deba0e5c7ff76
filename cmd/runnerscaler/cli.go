package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/runnerscaler/runnerscaler/internal/awsconf"
	"github.com/runnerscaler/runnerscaler/internal/kube"
	"github.com/runnerscaler/runnerscaler/internal/suggest"
)

// The conventions every subcommand follows, in one place:
//   - exit 0 on success, 1 when the command failed, 2 on a usage error;
//   - a usage error is one line on stderr, then "run 'runnerscaler CMD -h' for help";
//   - -h prints the help on stdout and exits 0;
//   - -o is the output format (table, json or yaml); a file written is --out;
//   - --region and --kubeconfig where AWS or Kubernetes is used, and errors that
//     name them when what they give is missing.

// Exit statuses.
const (
	exitSuccess  = 0
	exitFailure  = 1
	exitBadUsage = 2
)

// usageError is a command line the command cannot run. Exit reports it as one
// line and a pointer to the command's help.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usage error.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// flagSet is a subcommand's flags and help. It prints nothing itself: Parse
// returns usage errors, and a help request for -h, for Exit to report.
type flagSet struct {
	*flag.FlagSet
	// help is the text before the flags' list: the usage line, and what the
	// command does.
	help string
}

// newFlagSet returns the flags of `runnerscaler command`; help begins with its
// usage line.
func newFlagSet(command, help string) *flagSet {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, help: strings.TrimRight(help, "\n") + "\n"}
}

// helpRequest is -h: Exit prints the command's help on stdout. It matches flag.ErrHelp.
type helpRequest struct{ fs *flagSet }

func (h *helpRequest) Error() string        { return flag.ErrHelp.Error() }
func (h *helpRequest) Is(target error) bool { return target == flag.ErrHelp }

// Parse parses args, flags and positional arguments in any order (`status
// linux -o json`), and returns the positional ones. Errors are usage errors,
// or a help request (errors.Is flag.ErrHelp).
func (fs *flagSet) Parse(args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.FlagSet.Parse(args); errors.Is(err, flag.ErrHelp) {
			return nil, &helpRequest{fs}
		} else if err != nil {
			return nil, &usageError{fs.flagError(err)}
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional, args = append(positional, fs.Arg(0)), fs.Args()[1:]
	}
}

// flagName is a flag as the docs and the help write it: -o for one letter,
// --region for a word.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	flagInError   = regexp.MustCompile(`(^|[\s:])-+([A-Za-z][-A-Za-z0-9]*)`)
)

// flagError rewrites the flag package's error in the help's terms: the flag
// as written in the docs, and for an unknown one the flag it was probably
// meant to be.
func (fs *flagSet) flagError(err error) error {
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		msg = "unknown flag " + flagName(m[1])
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if s := suggest.Closest(m[1], names); s != "" {
			msg += "; did you mean " + flagName(s) + "?"
		}
		return errors.New(msg)
	}
	return errors.New(flagInError.ReplaceAllStringFunc(msg, func(s string) string {
		m := flagInError.FindStringSubmatch(s)
		if fs.Lookup(m[2]) == nil {
			return s
		}
		return m[1] + flagName(m[2])
	}))
}

// PrintHelp writes the help and the flags' list to w, each flag as the docs
// write it (--region, -o).
func (fs *flagSet) PrintHelp(w io.Writer) {
	fmt.Fprint(w, fs.help)
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprintln(w, "\nflags:")
			first = false
		}
		kind, usage := flag.UnquoteUsage(f)
		switch f.Value.(type) {
		case *durationValue:
			kind = "duration"
		case *outputFormat:
			kind = "format"
		}
		line := "  " + flagName(f.Name)
		if kind != "" {
			line += " " + kind
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// DurationVar registers a duration flag whose bad value is reported with the
// form it takes.
func (fs *flagSet) DurationVar(p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(&durationValue{p}, name, usage)
}

// durationValue is a duration flag's value.
type durationValue struct{ d *time.Duration }

func (v *durationValue) String() string {
	if v == nil || v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return errors.New("want a positive duration with its unit, such as 90s, 15m or 1h30m")
	}
	*v.d = d
	return nil
}

// Output registers -o, the output format, one of formats (the first is the default).
func (fs *flagSet) Output(formats ...string) *outputFormat {
	o := &outputFormat{value: formats[0], formats: formats}
	fs.Var(o, "o", "output format: "+strings.Join(formats, ", "))
	return o
}

// outputFormat is the value of -o.
type outputFormat struct {
	value   string
	formats []string
}

func (o *outputFormat) String() string {
	if o == nil {
		return ""
	}
	return o.value
}

func (o *outputFormat) Set(v string) error {
	if !slices.Contains(o.formats, v) {
		return fmt.Errorf("want %s", strings.Join(o.formats, ", "))
	}
	o.value = v
	return nil
}

// Write writes v as the format says: JSON or YAML (by v's JSON names), or the
// table table writes.
func (o *outputFormat) Write(w io.Writer, v any, table func() error) error {
	switch o.value {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out, err := yaml.JSONToYAML(raw)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	return table()
}

// Exit reports err as the conventions say (a help request: the help, on
// stdout) and returns the exit status.
func Exit(command string, err error, stdout, stderr io.Writer) int {
	var usage *usageError
	var help *helpRequest
	var reported interface{ reported() } // the command's output said it already
	switch {
	case err == nil:
		return exitSuccess
	case errors.As(err, &help):
		help.fs.PrintHelp(stdout)
		return exitSuccess
	case errors.As(err, &reported):
		return exitFailure
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "runnerscaler %s: %v\nrun 'runnerscaler %s -h' for help\n", command, err, command)
		return exitBadUsage
	}
	fmt.Fprintf(stderr, "runnerscaler %s: %v\n", command, err)
	return exitFailure
}

// env is what a command reads and writes outside its arguments.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// loadAWS returns the operator's AWS configuration in region (default: the
// environment's and the profile's), with the SDK's own log silenced: its
// warnings are not the command's output. No region is an error naming --region.
func loadAWS(ctx context.Context, region string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{}), config.WithClientLogMode(0)}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := awsconf.Load(ctx, opts...)
	if err != nil {
		return aws.Config{}, err
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("no AWS region: give --region (the stack's region), or set AWS_REGION or a region in your AWS profile")
	}
	return cfg, nil
}

// loadKube returns the operator's Kubernetes configuration, as kubectl finds
// it; none is an error naming --kubeconfig.
func loadKube(kubeconfig, context string) (*rest.Config, error) {
	cfg, err := kube.FromOperatorKubeconfig(kubeconfig, context)
	for e := err; e != nil; e = errors.Unwrap(e) {
		if clientcmd.IsEmptyConfig(e) {
			return nil, errors.New("no kubeconfig: give --kubeconfig FILE, or set KUBECONFIG, or write ~/.kube/config " +
				"(aws eks update-kubeconfig --name CLUSTER --region REGION)")
		}
	}
	return cfg, err
}

// poolsFile finds the pools file: given (by --pools or an argument), else
// RUNNERSCALER_POOLS, else pools.yaml or infra/pools.yaml in the current
// directory (a checkout of this repository). None is a usage error naming how
// to give it (flagName: "--pools FILE", or "FILE" for an argument).
func poolsFile(given string, getenv func(string) string, flagName string) (string, error) {
	if given != "" {
		return given, nil
	}
	if v := getenv("RUNNERSCALER_POOLS"); v != "" {
		return v, nil
	}
	for _, p := range []string{"pools.yaml", "infra/pools.yaml"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", usagef("no pools file: give %s (the file the stack was deployed with) or set RUNNERSCALER_POOLS; "+
		"there is no pools.yaml or infra/pools.yaml here", flagName)
}

// errIsHelp reports whether err is a -h: not a failure.
func errIsHelp(err error) bool { return errors.Is(err, flag.ErrHelp) }
