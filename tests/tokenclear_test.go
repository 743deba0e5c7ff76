package tests

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/runnerimage"
)

// asRootPools: one persistent pool, so its runner registers with the scope's
// registration token, whose template (asRootTemplate) runs job steps as root.
const asRootPools = `
pools:
  - name: asroot
    organization: acme
    labels: [asroot]
    ephemeral: false
    maxReplicas: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`

// asRootTemplate is loop.RunnerTemplate whose container puts a setpriv that
// drops nothing first in PATH, before it starts the entrypoint under tini: the
// runner, and every job step, run as root. That is what docker gives a job (a
// privileged container is root on the node; the stack's node has no docker),
// and a template the sweeper cannot see through: the pool states no opt-in.
func asRootTemplate(image string) string {
	const script = `mkdir -p /tmp/asroot &&
printf '#!/bin/sh\nwhile [ "$1" != -- ]; do shift; done\nshift\nexec "$@"\n' >/tmp/asroot/setpriv &&
chmod 755 /tmp/asroot/setpriv &&
exec ` + runnerimage.Entrypoint
	spec := map[string]any{
		"hostNetwork": true,
		"dnsPolicy":   "Default",
		"containers": []any{map[string]any{
			"name": "runner", "image": image, "imagePullPolicy": "Never",
			"command":   []string{runnerimage.Tini, "--", "/bin/sh", "-c", script},
			"resources": map[string]any{"requests": map[string]string{"cpu": "10m", "memory": "24Mi"}},
			"env": []any{
				map[string]string{"name": "RUNNER_GRACEFUL_STOP_TIMEOUT", "value": fmt.Sprint(loop.GracefulStop)},
				map[string]string{"name": "PATH", "value": "/tmp/asroot:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
				map[string]string{"name": "RUNNER_ALLOW_RUNASROOT", "value": "1"},
			},
		}},
	}
	raw, _ := json.Marshal(map[string]any{"spec": spec})
	return string(raw)
}

// rootStep is a job step run as root that looks for the registration token: in
// every process's environment — root reads /proc/PID/environ of all, PID 1's
// (tini's, the kubelet's variables) included — and as the runner's Secret's
// file, which it waits (up to two minutes) to see gone, never reading it.
const rootStep = `
echo "== id: $(id)"
cat /proc/1/environ >/dev/null && echo "== read PID 1's environment"
echo "== every process's environment"
for f in /proc/[0-9]*/environ; do echo "-- $f"; tr '\0' '\n' <"$f"; echo; done 2>&1
echo "== the token's file"
i=0
while [ -e ` + runnerpod.TokenFile + ` ] && [ "$i" -lt 120 ]; do sleep 1; i=$((i + 1)); done
if [ -e ` + runnerpod.TokenFile + ` ]; then echo "TOKEN FILE STILL THERE after ${i}s"; else echo "token file gone (waited ${i}s)"; fi
echo "== done"
`

// simToken is a registration token of the GitHub simulator (githubsim).
var simToken = regexp.MustCompile(`AABF[0-9a-f]{32}`)

// TestJobAsRootFindsNoRegistrationToken: a token runner's Secret holds no token
// once the runner registered, and a job step on it that runs as root — what
// docker gives a job — finds the token in no process's environment (it reads
// them all, PID 1's included, where the kubelet's variables stay for the
// container's life), and sees the token's file go once the Secret lost it.
func TestJobAsRootFindsNoRegistrationToken(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, asRootPools, loop.Options{SweepEvery: time.Second}, asRootTemplate)
	job := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "asroot"}, Script: rootStep})
	w.waitFor("the job completed", 4*time.Minute, func() bool { return w.job(job.ID).State == githubsim.JobCompleted })
	done := w.job(job.ID)
	t.Logf("the job step's output (exit %d):\n%s", done.ExitCode, done.Output)
	if !strings.Contains(done.Output, "== id: uid=0(root)") || !strings.Contains(done.Output, "== read PID 1's environment") ||
		!strings.Contains(done.Output, "== done") {
		t.Fatalf("the step did not run as root, reading PID 1's environment, to its end: this test would prove nothing")
	}
	for what, leak := range map[string]*regexp.Regexp{"a registration token": simToken,
		"RUNNER_TOKEN": regexp.MustCompile(`RUNNER_TOKEN=`), "a runner input": regexp.MustCompile(`ACTIONS_RUNNER_INPUT_TOKEN=`)} {
		if m := leak.FindString(done.Output); m != "" {
			t.Errorf("a process's environment has %s (%s)", what, m)
		}
	}
	if !strings.Contains(done.Output, "token file gone") {
		t.Errorf("the token's file stayed while the job ran")
	}

	list, err := w.kube.AppsV1().StatefulSets(w.ns).List(t.Context(), metav1.ListOptions{LabelSelector: runnerpod.LabelPool + "=asroot"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("statefulsets %v (%v), want the runner's", list, err)
	}
	sts := list.Items[0]
	pod, err := w.kube.CoreV1().Pods(w.ns).Get(t.Context(), runnerpod.PodName(sts.Name), metav1.GetOptions{})
	if err != nil || pod.Annotations[runnerpod.AnnotationRunnerID] == "" || pod.Spec.Containers[0].Name != runnerpod.ContainerName {
		t.Fatalf("pod %v (%v): want it registered", pod.Annotations, err)
	}
	for _, e := range pod.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("the runner container gets %s from its Secret: the kubelet's variables stay in PID 1's environment", e.Name)
		}
	}
	sec, err := w.kube.CoreV1().Secrets(w.ns).Get(t.Context(), sts.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, has := sec.Data[runnerpod.SecretToken]; has {
		t.Errorf("the registered runner's Secret still holds its registration token")
	}
	if _, has := sts.Annotations[runnerpod.AnnotationTokenExpiresAt]; has {
		t.Errorf("the registered runner's StatefulSet still records a token in its Secret")
	}
	w.noViolations()
}
