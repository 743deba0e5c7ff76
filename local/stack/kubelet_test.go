package stack_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/local/stack"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestRestartKubelet restarts the node's kubelet under a running pod: a new
// kubelet process, with the same command line and log, recorded in the state file
// (so that Down stops it), reports the node Ready, and the pod's container keeps
// running throughout — the same process, the same container, no restart.
func TestRestartKubelet(t *testing.T) {
	t.Parallel()
	dir := testenv.StackDir(t)
	cs, ns := testenv.Namespace(t)
	ctx := t.Context()

	// The pause image is in the node from its start; the token, an argument the
	// pause process ignores, finds the container's process on this machine.
	token := fmt.Sprintf("token-%d", time.Now().UnixNano())
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: ns},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "main", Image: stack.PauseImage, ImagePullPolicy: corev1.PullNever, Args: []string{token},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	running := func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Running != nil
	}
	pod = waitPodState(t, cs, pod, 60*time.Second, "its container running", running)
	container := pod.Status.ContainerStatuses[0].ContainerID
	procs := awaitProcesses(token, 1)
	if len(procs) != 1 {
		t.Fatalf("processes running the pod's container: %v, want one", procs)
	}

	before, err := stack.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	old, ok := before.Proc("kubelet")
	if !ok || !runsCmd(old.PID, old.Cmd) {
		t.Fatalf("the state names kubelet %+v, not a running kubelet", old)
	}
	logPath := filepath.Join(dir, "logs", "kubelet.log")
	logBefore, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if err := stack.RestartKubelet(ctx, dir); err != nil {
		t.Fatalf("restarting the kubelet: %v", err)
	}
	t.Logf("kubelet restarted and node Ready again in %s", time.Since(start).Round(time.Millisecond))

	after, err := stack.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	restarted, _ := after.Proc("kubelet")
	if restarted.PID == old.PID {
		t.Fatalf("the state names kubelet pid %d before and after the restart, want a new process", old.PID)
	}
	if runsCmd(old.PID, old.Cmd) {
		t.Errorf("the old kubelet (pid %d) still runs", old.PID)
	}
	if !runsCmd(restarted.PID, old.Cmd) {
		t.Errorf("pid %d, the state's new kubelet, does not run the old command line %q", restarted.PID, old.Cmd)
	}
	if logAfter, err := os.ReadFile(logPath); err != nil || !bytes.HasPrefix(logAfter, logBefore) || len(logAfter) == len(logBefore) {
		t.Errorf("kubelet log after the restart (%d bytes, %v): want the old one (%d bytes) with the new kubelet's lines appended",
			len(logAfter), err, len(logBefore))
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, stack.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady }); i < 0 ||
		node.Status.Conditions[i].Status != corev1.ConditionTrue || node.Status.Conditions[i].LastHeartbeatTime.Time.Before(start.Truncate(time.Second)) {
		t.Errorf("node conditions after the restart = %+v, want Ready reported since %s", node.Status.Conditions, start.UTC().Format(time.RFC3339))
	}

	// The new kubelet syncs every pod at least once a syncFrequency (10 s): a
	// container it were to kill or replace would be gone within that window.
	for deadline := time.Now().Add(12 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !running(p) || p.Status.ContainerStatuses[0].ContainerID != container || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Fatalf("pod after the kubelet restart: phase %s, containers %+v; want Running, container %s, no restart",
				p.Status.Phase, p.Status.ContainerStatuses, container)
		}
		if now := processesMentioning(token); !slices.Equal(now, procs) {
			t.Fatalf("the container's process after the kubelet restart: %v, want the same as before: %v", now, procs)
		}
	}
}

// runsCmd reports whether process pid runs the command line cmd.
func runsCmd(pid int, cmd []string) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && slices.Equal(strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00"), cmd)
}

// TestConcurrentKubeletRestartsTakeTurns: two restarts at once (test binaries
// run in parallel) leave one kubelet, the one the state names.
func TestConcurrentKubeletRestartsTakeTurns(t *testing.T) {
	t.Parallel()
	dir := testenv.StackDir(t)
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- stack.RestartKubelet(t.Context(), dir) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("restarting the kubelet: %v", err)
		}
	}
	s, err := stack.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, _ := s.Proc("kubelet")
	if !runsCmd(kubelet.PID, kubelet.Cmd) {
		t.Fatalf("the state's kubelet (pid %d) does not run", kubelet.PID)
	}
	if procs := processesMentioning("--root-dir=" + filepath.Join(dir, "node", "kubelet")); len(procs) != 1 {
		t.Fatalf("kubelet processes after two concurrent restarts: %v, want one", procs)
	}
}
