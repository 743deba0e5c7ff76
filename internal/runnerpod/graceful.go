package runnerpod

import (
	"fmt"
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The graceful stop's timing (runner/entrypoint.sh): on SIGTERM the entrypoint
// looks for a job for up to RUNNER_STOP_SETTLE_MS, lets a running job finish for
// up to RUNNER_GRACEFUL_STOP_TIMEOUT seconds (looking once more for a job at its
// end), then tells the runner to stop, which cancels the job and reports it to
// GitHub. The pool may tune both; the kubelet kills the container when the pod's
// terminationGracePeriodSeconds runs out, and a job killed then is never reported.
//
// The period is the runner container's alone. The docker sidecar (dockerEnabled)
// is a native sidecar, which the kubelet stops only once the runner container
// has exited, with what remains of the period (at least 2 s): its dockerd serves
// the job to its end and the runner's cancelling of it, and being killed
// afterwards loses nothing the job reported.
const (
	// EnvGracefulStop: seconds a running job may take to finish after SIGTERM.
	EnvGracefulStop = "RUNNER_GRACEFUL_STOP_TIMEOUT"
	// EnvStopSettle: milliseconds the entrypoint looks for a job handed over at the stop.
	EnvStopSettle = "RUNNER_STOP_SETTLE_MS"
	// DefaultGracefulStop and DefaultStopSettleMS are the entrypoint's defaults,
	// each written into the runner's environment when the template does not set it.
	DefaultGracefulStop = 15
	DefaultStopSettleMS = 1000
	// RunnerShutdownSeconds is what the runner gets, after the entrypoint's wait,
	// to cancel its job and report it to GitHub.
	RunnerShutdownSeconds = 15
)

// StopSeconds is the shortest terminationGracePeriodSeconds a runner pod gets:
// the longest the entrypoint takes from SIGTERM to telling the runner to stop
// (the wait for a job and twice the settling time, rounded up to seconds), and
// RunnerShutdownSeconds.
func StopSeconds(gracefulStop, settleMS int64) int64 {
	return gracefulStop + 2*((settleMS+999)/1000) + RunnerShutdownSeconds
}

var digits = regexp.MustCompile(`^[0-9]{1,9}$`)

// stopTiming writes the graceful stop's timing into the runner container's
// environment (its defaults when the template sets none, so that neither the
// image nor an envFrom can change what the grace period was derived from), sets
// the pod's terminationGracePeriodSeconds to StopSeconds when the template
// leaves it unset, and refuses a template whose grace period, or a probe's, is
// shorter. Errors name the field by its path in the template.
func stopTiming(spec *corev1.PodSpec) error {
	i := runnerIndex(spec.Containers)
	c := &spec.Containers[i]
	grace, err := envNumber(c, i, EnvGracefulStop, DefaultGracefulStop)
	if err != nil {
		return err
	}
	settle, err := envNumber(c, i, EnvStopSettle, DefaultStopSettleMS)
	if err != nil {
		return err
	}
	need := StopSeconds(grace, settle)
	why := fmt.Sprintf("the runner's stop needs %d s (%s %d s, twice %s %d ms, and %d s for the runner to cancel and report its job)",
		need, EnvGracefulStop, grace, EnvStopSettle, settle, RunnerShutdownSeconds)
	if t := spec.TerminationGracePeriodSeconds; t == nil {
		spec.TerminationGracePeriodSeconds = ptr.To(need)
	} else if *t < need {
		return fmt.Errorf("spec.terminationGracePeriodSeconds: %d is too short: %s", *t, why)
	}
	for _, pr := range []struct {
		field string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"startupProbe", c.StartupProbe}} {
		if field, probe := pr.field, pr.probe; probe != nil && probe.TerminationGracePeriodSeconds != nil && *probe.TerminationGracePeriodSeconds < need {
			return fmt.Errorf("spec.containers[%d].%s.terminationGracePeriodSeconds: %d is too short: %s",
				i, field, *probe.TerminationGracePeriodSeconds, why)
		}
	}
	return nil
}

// envNumber reads the container's variable name (its last entry, the one the
// kubelet uses) as a whole number, or adds it with def when it is not set.
func envNumber(c *corev1.Container, index int, name string, def int64) (int64, error) {
	at := -1
	for j, e := range c.Env {
		if e.Name == name {
			at = j
		}
	}
	if at < 0 {
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: strconv.FormatInt(def, 10)})
		return def, nil
	}
	e := c.Env[at]
	field := fmt.Sprintf("spec.containers[%d].env[%d]", index, at)
	if e.ValueFrom != nil {
		return 0, fmt.Errorf("%s.valueFrom: %s must be a value in the template: the pod's terminationGracePeriodSeconds is derived from it", field, name)
	}
	if !digits.MatchString(e.Value) {
		return 0, fmt.Errorf("%s.value: %q: %s must be a whole number (at most 9 digits)", field, e.Value, name)
	}
	n, _ := strconv.ParseInt(e.Value, 10, 64) // at most 9 digits
	return n, nil
}
