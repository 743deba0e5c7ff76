package fakerunner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/runnerscaler/runnerscaler/local/runnerfiles"
)

// configArgs are config.sh's options, as actions/runner's CommandSettings names them.
type configArgs struct {
	unattended, ephemeral, replace bool
	url, token, name, labels       string
	group, work                    string
}

var (
	configValueFlags = []string{"url", "token", "name", "labels", "runnergroup", "work"}
	configBoolFlags  = []string{"unattended", "ephemeral", "replace", "disableupdate", "no-default-labels"}
)

// parseConfigArgs reads --flag value / --flag=value options; a flag missing from
// the command line comes from ACTIONS_RUNNER_INPUT_<FLAG>, as for the real runner.
// Unknown arguments are reported and ignored, as the real runner does.
func parseConfigArgs(env Env, args []string) (configArgs, error) {
	values, bools := map[string]string{}, map[string]bool{}
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			return configArgs{}, fmt.Errorf("unexpected argument %q", args[i])
		}
		name, value, hasValue := strings.Cut(strings.ToLower(name), "=")
		switch {
		case slices.Contains(configBoolFlags, name):
			bools[name] = !hasValue || value == "true"
		case slices.Contains(configValueFlags, name):
			if !hasValue {
				if i+1 >= len(args) {
					return configArgs{}, fmt.Errorf("--%s needs a value", name)
				}
				i++
				value = args[i]
			}
			values[name] = value
		default:
			fmt.Fprintf(env.Stderr, "Unrecognized command-line input arguments: '%s'. For usage refer to: ./config.sh --help\n", name)
		}
	}
	for _, name := range configValueFlags {
		if _, ok := values[name]; !ok {
			values[name] = env.Getenv("ACTIONS_RUNNER_INPUT_" + strings.ToUpper(name))
		}
	}
	for _, name := range configBoolFlags {
		if _, ok := bools[name]; !ok {
			bools[name] = strings.EqualFold(env.Getenv("ACTIONS_RUNNER_INPUT_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))), "true")
		}
	}
	return configArgs{unattended: bools["unattended"], ephemeral: bools["ephemeral"], replace: bools["replace"],
		url: values["url"], token: values["token"], name: values["name"], labels: values["labels"],
		group: values["runnergroup"], work: values["work"]}, nil
}

// configure is config.sh: register the runner and write .runner and .credentials.
func configure(env Env, root string, args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(env.Stderr, "config.sh: error: "+format+"\n", a...)
		return 1
	}
	if len(args) > 0 && args[0] == "remove" {
		return fail("'config.sh remove' is not simulated: delete the runner through the REST API and remove %s and %s", runnerfiles.SettingsFile, runnerfiles.CredentialsFile)
	}
	a, err := parseConfigArgs(env, args)
	if err != nil {
		return fail("%v", err)
	}
	if _, err := os.Stat(filepath.Join(root, runnerfiles.SettingsFile)); err == nil {
		return fail("Cannot configure the runner because it is already configured. To reconfigure the runner, run './config.sh remove' first.")
	}
	for _, req := range []struct{ flag, value string }{{"url", a.url}, {"token", a.token}} {
		if req.value == "" {
			how := "Terminating unattended configuration."
			if !a.unattended {
				how = "This fake runner never prompts: pass it on the command line or in ACTIONS_RUNNER_INPUT_" + strings.ToUpper(req.flag) + "."
			}
			return fail("Invalid configuration provided for %s. %s", req.flag, how)
		}
	}
	u, err := url.Parse(a.url)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fail("--url %q is not a URL", a.url)
	}
	if a.name == "" {
		if a.name, err = os.Hostname(); err != nil {
			return fail("no --name and no host name: %v", err)
		}
	}
	if a.work == "" {
		a.work = "_work"
	}
	var labels []string
	for _, l := range strings.Split(a.labels, ",") {
		if l = strings.TrimSpace(l); l != "" {
			labels = append(labels, l)
		}
	}
	fmt.Fprintf(env.Stdout, "--------------------------------------------------------------------------------\n|  Fake GitHub Actions runner (runnerscaler local stack): %s\n--------------------------------------------------------------------------------\n", a.url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := newClient(u.Scheme + "://" + u.Host)
	reg, err := api.register(ctx, a.token, registration{URL: a.url, Name: a.name, Labels: labels, RunnerGroup: a.group,
		Ephemeral: a.ephemeral, Replace: a.replace, Version: version(env)})
	switch status := statusOf(err); {
	case err == nil:
	case status == http.StatusUnauthorized:
		return fail("the registration token is invalid or has expired; get a new one (%v)", err)
	case status == http.StatusConflict:
		return fail("A runner exists with the same name %q; pass --replace to replace it (%v)", a.name, err)
	case status == http.StatusNotFound:
		var ae *apiError
		if errors.As(err, &ae) && strings.Contains(ae.message, "runner version is out of date") {
			return fail("%s (Http response code: NotFound from 'POST %s')", ae.message, ae.op)
		}
		return fail("registration refused: %v", err)
	case errors.Is(err, context.DeadlineExceeded) || status == 0:
		return fail("cannot reach GitHub at %s: %v", api.base, err)
	default:
		return fail("registration failed: %v", err)
	}
	fmt.Fprintln(env.Stdout, "√ Connected to GitHub")
	mode := "persistent"
	if reg.Runner.Ephemeral {
		mode = "ephemeral"
	}
	fmt.Fprintf(env.Stdout, "√ Runner successfully added (id %d, name %s, %s)\n", reg.Runner.AgentID, reg.Runner.AgentName, mode)
	reg.Runner.WorkFolder = a.work
	if err := writeConfig(root, reg.Runner, reg.Credentials); err != nil {
		return fail("%v", err)
	}
	fmt.Fprintln(env.Stdout, "√ Settings Saved.")
	return 0
}
