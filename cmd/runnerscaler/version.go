package main

import (
	"fmt"
	"runtime/debug"
)

// version is the release, set when building one:
// go build -ldflags "-X main.version=v1.2.3" ./cmd/runnerscaler.
var version string

// versionInfo is what `runnerscaler version` says.
type versionInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// buildVersion is the version set at build time, else the module's (a `go
// install ...@v1.2.3` build), else "devel" with the commit it was built from.
func buildVersion() versionInfo {
	v := versionInfo{Version: version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Go = bi.GoVersion
	if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	return v
}

const versionHelp = `usage: runnerscaler version [-o table|json|yaml]

Prints the runnerscaler's version, the commit it was built from, and the Go release.`

func parseVersion(args []string) (*outputFormat, error) {
	fs := newFlagSet("version", versionHelp)
	output := fs.Output("table", "json", "yaml")
	positional, err := fs.Parse(args)
	if err == nil && len(positional) > 0 {
		err = usagef("no arguments, got %q", positional)
	}
	return output, err
}

// printVersion is `runnerscaler version`.
func printVersion(args []string, e env) error {
	output, err := parseVersion(args)
	if err != nil {
		return err
	}
	v := buildVersion()
	return output.Write(e.stdout, v, func() error {
		line := "runnerscaler " + v.Version
		if v.Commit != "" {
			line += " (commit " + v.Commit
			if v.Modified {
				line += ", modified"
			}
			line += ")"
		}
		_, err := fmt.Fprintf(e.stdout, "%s %s\n", line, v.Go)
		return err
	})
}
