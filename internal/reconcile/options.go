package reconcile

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Validate gives the options left zero their defaults, then reports, by field
// name, the options New cannot use: a missing JobLinks (without the
// job↔runner link a busy runner could be removed) or Roster, a negative duration, and a
// GitHubURL that is not an absolute http(s) URL.
func (o *Options) Validate() error {
	o.defaults()
	var errs []error
	if o.JobLinks == nil {
		errs = append(errs, errors.New("Options.JobLinks is required: without the job↔runner link a busy runner could be removed"))
	}
	if o.Roster == nil {
		errs = append(errs, errors.New("Options.Roster is required: without the roster no object can be told to be a runner's"))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"RegistrationTimeout", o.RegistrationTimeout}, {"RecreationDelay", o.RecreationDelay},
		{"CleanupInterval", o.CleanupInterval}, {"OrphanGrace", o.OrphanGrace}, {"IdleConfirmation", o.IdleConfirmation},
		{"WorkflowPodGrace", o.WorkflowPodGrace}, {"FinishingFor", o.FinishingFor},
		{"RunnerListMaxAge", o.RunnerListMaxAge},
	} {
		if f.d < 0 {
			errs = append(errs, fmt.Errorf("Options.%s is %s: want 0 (the default) or more", f.name, f.d))
		}
	}
	if o.GitHubURL != "" {
		if u, err := url.Parse(o.GitHubURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("Options.GitHubURL %q is not an http(s) URL", o.GitHubURL))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("reconcile options: %w", err)
	}
	return nil
}

// defaults gives each option left zero its default; a negative duration stays,
// for Validate to report. RunnerListMaxAge has none: zero reads each pool's
// list for its own sweep.
func (o *Options) defaults() {
	if o.IdleConfirmation == 0 {
		o.IdleConfirmation = DefaultIdleConfirmation
	}
	if o.RegistrationTimeout == 0 {
		o.RegistrationTimeout = 10 * time.Minute
	}
	if o.RecreationDelay == 0 {
		o.RecreationDelay = 10 * time.Minute
	}
	if o.GitHubURL == "" {
		o.GitHubURL = "https://github.com"
	}
	if o.CleanupInterval == 0 {
		o.CleanupInterval = time.Hour
	}
	if o.OrphanGrace == 0 {
		o.OrphanGrace = time.Minute
	}
	if o.WorkflowPodGrace == 0 {
		o.WorkflowPodGrace = DefaultWorkflowPodGrace
	}
	if o.FinishingFor == 0 {
		o.FinishingFor = DefaultFinishingFor
	}
}
