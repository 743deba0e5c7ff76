package pool

import (
	"errors"
	"fmt"
)

// A pool that uses the registration token (UsesToken) gives each of its runners
// the scope's token, valid for up to an hour, which registers any number of
// runners with any name and labels in the scope. The runner image keeps it from
// the jobs (runner/README.md): the runner container starts as root, the token
// reaches config.sh alone, as a file of the runner's Secret that no job can
// open, and the sweeper clears it from the Secret once GitHub lists the runner
// (package reconcile). That holds only while a job is neither root nor the
// entrypoint's user and has no Kubernetes credential. With docker a job is root
// on the node, where it reads every file and process environment — the token of
// each runner on the node that has not registered yet. Such a pool must say, with
// AllowJobsToReadRegistrationToken, that it accepts this; its name says the risk.
// The pool settings are checked here, the pod template's (a user, a service
// account token, privilege escalation) by package runnerpod, with TokenReadable's
// words. What the file does not show — whether a pod reaches the instance
// metadata service, who may read Secrets — is for the cluster (docs/security.md).

// validateTokenExposure: a pool that uses the registration token with docker
// accepts that its jobs read the token; a pool that does not use the token does
// not say so.
func (p *Pool) validateTokenExposure() error {
	const docker = "a job that uses docker runs privileged containers, which are root on the node"
	k := p.Kubernetes
	switch {
	case p.AllowJobsToReadRegistrationToken && !p.UsesToken():
		return errors.New("allowJobsToReadRegistrationToken: the pool's runners register with JIT configs, " +
			"not the registration token: there is no token to allow; remove it")
	case k.DockerEnabled:
		return p.TokenReadable("kubernetes.dockerEnabled", docker)
	case k.DockerdWithinRunnerContainer:
		return p.TokenReadable("kubernetes.dockerdWithinRunnerContainer", docker)
	}
	return nil
}

// TokenReadable is the error of a setting, at field (the path FieldOf reads),
// with which the pool's jobs can read the registration token its runners
// register with (how says why); nil when the pool does not use the token, or
// accepts that its jobs read it (AllowJobsToReadRegistrationToken).
func (p *Pool) TokenReadable(field, how string) error {
	if !p.UsesToken() || p.AllowJobsToReadRegistrationToken {
		return nil
	}
	instead := "registration: jit"
	if !p.IsEphemeral() {
		instead = "ephemeral runners with JIT configs (ephemeral: true)"
	}
	sc := p.Scope()
	return fmt.Errorf("%s: %s, so the pool's jobs can read the registration token its runners register with, "+
		"and with it register runners of their own in %s %s for up to an hour, which GitHub hands that %s's jobs and their secrets; "+
		"use %s, whose jobs can read one runner's identity only, or accept the risk with allowJobsToReadRegistrationToken: true",
		field, how, sc.Kind(), sc.Name(), sc.Kind(), instead)
}
