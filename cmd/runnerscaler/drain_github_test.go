package main

import (
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestDrainGitHubCredentials: without GITHUB_TOKEN drain does not check
// GitHub (a nil Leftovers, so the drain says so); with it, it looks for the
// runners of the -pools file, which must load.
func TestDrainGitHubCredentials(t *testing.T) {
	t.Parallel()
	pools := filepath.Join("..", "..", "local", "pools.yaml")
	parse := func(args ...string) *gitHubFlags {
		t.Helper()
		fs := flag.NewFlagSet("drain", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := addGitHubFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f
	}
	env := func(token string) func(string) string {
		return func(k string) string { return map[string]string{"GITHUB_TOKEN": token}[k] }
	}
	if l, err := parse("-pools", pools).leftovers(env("")); err != nil || l != nil {
		t.Fatalf("without a token: %v, %v; want nothing to check GitHub with", l, err)
	}
	if l, err := parse("-pools", pools).leftovers(env("ghp_x")); err != nil || l == nil {
		t.Fatalf("with a token: %v, %v; want GitHub checked", l, err)
	}
	if _, err := parse("-pools", "missing.yaml").leftovers(env("ghp_x")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("with a token and no pools file: %v; want an error naming the file", err)
	}
}
