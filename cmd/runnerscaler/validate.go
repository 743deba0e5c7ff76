package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolcheck"
)

const validateHelp = `usage: runnerscaler validate [-o table|json|yaml] [FILE]

Checks a pools file offline as the sweeper checks it when it starts (every
field, and every pool's pod template and volume claim templates) and reports
every problem at once, as FILE:LINE:COLUMN: MESSAGE, with the field a misspelt
one was probably meant to be. FILE defaults to RUNNERSCALER_POOLS, then
./pools.yaml, then ./infra/pools.yaml. 'sam build' runs it (the Makefile's
build targets), so a file the sweeper would refuse never reaches AWS.

Exit status: 0 the file is valid; 1 it is not (or cannot be read); 2 bad usage.`

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

func parseValidate(args []string, getenv func(string) string) (file string, output *outputFormat, err error) {
	fs := newFlagSet("validate", validateHelp)
	output = fs.Output("table", "json", "yaml")
	positional, err := fs.Parse(args)
	switch {
	case err != nil:
		return "", nil, err
	case len(positional) > 1:
		return "", nil, usagef("one FILE at most, got %q", positional)
	case len(positional) == 1:
		file = positional[0]
	}
	file, err = poolsFile(file, getenv, "FILE")
	return file, output, err
}

// validate is `runnerscaler validate`.
func validate(args []string, e env) error {
	file, output, err := parseValidate(args, e.getenv)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	problems := poolcheck.Check(raw)
	report := validation{File: file, Valid: len(problems) == 0, Problems: []problemAtPlace{}}
	for _, p := range problems {
		report.Problems = append(report.Problems, problemAtPlace{Line: p.Line, Column: p.Column, Message: p.Brief()})
	}
	if err := output.Write(e.stdout, report, func() error { return printProblems(e.stdout, e.stderr, file, problems) }); err != nil {
		return err
	}
	if len(problems) > 0 {
		return errInvalid{len(problems)}
	}
	return nil
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
