package stack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/local/ociimage"
	"github.com/runnerscaler/runnerscaler/local/stack"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestControlPlane checks the moves the sweeper tests make on the real control plane:
// the StatefulSet controller creates the pod with an owner reference, a finalizer
// holds a deleted pod, the status subresource can be patched, and deleting the
// StatefulSet garbage-collects its pod. Its pod names a scheduler that does not
// exist, so kube-scheduler never touches it (a nodeSelector matching no node would
// keep it off the node too, but the scheduler would then write PodScheduled=False
// into its status, racing the test's UpdateStatus) and the test plays the kubelet.
func TestControlPlane(t *testing.T) {
	t.Parallel()
	cs, ns := testenv.Namespace(t)
	ctx := t.Context()
	sts := statefulSet(ns, "runner")
	sts, err := cs.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating statefulset: %v", err)
	}

	pod := waitPod(t, cs, ns, "runner-0")
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != sts.UID {
		t.Fatalf("pod owner references = %+v, want the statefulset %s", pod.OwnerReferences, sts.UID)
	}

	// The kubelet's moves: Running/Ready, then the runner container exits 0.
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
	}
	pod, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("patching pod status: %v", err)
	}
	if got := pod.Status.ContainerStatuses[0].State.Terminated; got == nil || got.ExitCode != 0 {
		t.Fatalf("pod status after update = %+v, want runner terminated with exit code 0", pod.Status)
	}

	// A finalizer holds a deleted pod until it is removed.
	patch := []byte(`{"metadata":{"finalizers":["runnerscaler.dev/test"]}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("adding finalizer: %v", err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting pod: %v", err)
	}
	held, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("finalized pod after delete: err=%v deletionTimestamp=%v, want it held and marked", err, held.DeletionTimestamp)
	}
	clear := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, clear, metav1.PatchOptions{}); err != nil {
		t.Fatalf("removing finalizer: %v", err)
	}

	// The controller recreates the pod; deleting the StatefulSet garbage-collects it.
	recreated := waitPod(t, cs, ns, "runner-0")
	if recreated.UID == pod.UID {
		t.Fatalf("pod was not recreated after its deletion")
	}
	policy := metav1.DeletePropagationBackground
	if err := cs.AppsV1().StatefulSets(ns).Delete(ctx, sts.Name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatalf("deleting statefulset: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "runner-0", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("pod of deleted statefulset was not garbage-collected: %v", err)
	}
}

func waitPod(t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			return false, nil
		}
		pod = p
		return true, nil
	})
	if err != nil {
		t.Fatalf("statefulset controller did not create pod %s: %v", name, err)
	}
	return pod
}

func statefulSet(ns, name string) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SchedulerName: "runnerscaler.dev/no-scheduler",
					Containers:    []corev1.Container{{Name: "runner", Image: "runner:test"}},
				},
			},
		},
	}
}

// testImage is the image of testdata/exit0, built and imported by the tests.
const testImage = "localhost/runnerscaler/stack-test:1"

// TestNode checks the node the stack's tests rely on: it is Ready with no taint
// keeping pods off it, and its kubelet runs a pod's container for real, restarting
// it when it exits 0 (what a StatefulSet's ephemeral runner pod goes through).
func TestNode(t *testing.T) {
	t.Parallel()
	cs, ns := testenv.Namespace(t)
	ctx := t.Context()
	node, err := cs.CoreV1().Nodes().Get(ctx, stack.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting node %s: %v", stack.NodeName, err)
	}
	if !slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	}) {
		t.Errorf("node conditions = %+v, want Ready", node.Status.Conditions)
	}
	for _, taint := range node.Spec.Taints {
		t.Errorf("node has taint %s, want none (the not-ready taint removed)", taint.ToString())
	}

	testenv.ImportImage(t, buildTestImage(t))
	start := time.Now()
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, exitPod(ns, "exit0", "2s"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	waitPodState(t, cs, pod, 60*time.Second, "its container running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Running != nil
	})
	t.Logf("pod created → Running in %s", time.Since(start).Round(time.Millisecond))
	restarted := waitPodState(t, cs, pod, 60*time.Second, "restarted after exit code 0", func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		st := p.Status.ContainerStatuses[0]
		return st.RestartCount >= 1 && st.LastTerminationState.Terminated != nil &&
			st.LastTerminationState.Terminated.ExitCode == 0
	})
	t.Logf("pod restarted %s after creation", time.Since(start).Round(time.Millisecond))
	if restarted.Spec.NodeName != stack.NodeName {
		t.Errorf("pod ran on node %q, want %q", restarted.Spec.NodeName, stack.NodeName)
	}
}

// TestDown starts a stack of its own, runs pods on its node (one on the host's
// network, one on the node's bridge), and checks that Down leaves nothing of the
// node: no kubelet, containerd, shim or container process, nothing mounted in the
// stack's directory, no bridge, and no log link or CNI cache entry pointing into it.
func TestDown(t *testing.T) {
	t.Parallel()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "runnerscaler-downtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after Down; never remove through a mount Down left
		if len(mountsUnder(t, dir)) == 0 {
			_ = os.RemoveAll(dir)
		}
	})
	start := time.Now()
	s, err := stack.Up(t.Context(), stack.Options{Dir: dir, Root: root, Node: true,
		KubeBinDir: os.Getenv("RUNNERSCALER_KUBE_BIN"), Progress: testWriter{t}})
	if err != nil {
		_ = stack.Down(dir)
		t.Fatalf("stack up: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = stack.Down(dir)
		}
	})
	t.Logf("stack up with a Ready node in %s", time.Since(start).Round(time.Millisecond))

	if err := s.ImportImage(t.Context(), buildTestImage(t)); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Kube()
	if err != nil {
		t.Fatal(err)
	}
	if err := stack.EnsureNamespaces(t.Context(), cs, "down"); err != nil {
		t.Fatal(err)
	}
	token := fmt.Sprintf("token-%d", time.Now().UnixNano())
	bridged := exitPod("down", "bridged", "1h", token)
	bridged.Spec.HostNetwork = false // no traffic: the pod only gets an address on the bridge
	for _, pod := range []*corev1.Pod{exitPod("down", "sleeper", "1h", token), bridged} {
		pod, err := cs.CoreV1().Pods("down").Create(t.Context(), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating pod: %v", err)
		}
		waitPodState(t, cs, pod, 60*time.Second, "its container running", func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
		})
	}
	if procs := awaitProcesses(token, 2); len(procs) != 2 {
		t.Fatalf("processes running the pods' containers: %v, want two", procs)
	}
	bridge := nodeBridge(t, dir)
	if _, err := net.InterfaceByName(bridge); err != nil {
		t.Fatalf("bridge %s of the node while a pod uses it: %v", bridge, err)
	}
	if len(mountsUnder(t, dir)) == 0 {
		t.Fatalf("nothing mounted in the stack directory while a pod runs: the check below proves nothing")
	}

	start = time.Now()
	if err := stack.Down(dir); err != nil {
		t.Errorf("stack down: %v", err)
	}
	stopped = true
	t.Logf("stack down in %s", time.Since(start).Round(time.Millisecond))
	if procs := processesMentioning(dir); len(procs) > 0 {
		t.Errorf("processes of the stack left after Down: %v", procs)
	}
	if procs := processesMentioning(token); len(procs) > 0 {
		t.Errorf("the pod's container process left after Down: %v", procs)
	}
	if mounts := mountsUnder(t, dir); len(mounts) > 0 {
		t.Errorf("mounts left in the stack directory after Down: %v", mounts)
	}
	if _, err := net.InterfaceByName(bridge); err == nil {
		t.Errorf("bridge %s left after Down", bridge)
	}
	if refs := filesReferring(t, "/var/log/containers", dir); len(refs) > 0 {
		t.Errorf("container log links into the stack left after Down: %v", refs)
	}
	if refs := filesReferring(t, "/var/lib/cni/results", dir); len(refs) > 0 {
		t.Errorf("CNI cache entries of the stack's pods left after Down: %v", refs)
	}
}

// nodeBridge reads the name of the node's bridge from its CNI configuration.
func nodeBridge(t *testing.T, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "node", "cni", "net.d", "10-runnerscaler.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Bridge string `json:"bridge"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &conf); err != nil || len(conf.Plugins) == 0 || conf.Plugins[0].Bridge == "" {
		t.Fatalf("no bridge in the node's CNI configuration (%v): %s", err, raw)
	}
	return conf.Plugins[0].Bridge
}

// filesReferring lists the entries of hostDir (links by their target, files by
// their content) that mention dir.
func filesReferring(t *testing.T, hostDir, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(hostDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		p := filepath.Join(hostDir, e.Name())
		var text string
		if target, err := os.Readlink(p); err == nil {
			text = target
		} else if raw, err := os.ReadFile(p); err == nil {
			text = string(raw)
		}
		if strings.Contains(text, dir) {
			found = append(found, p)
		}
	}
	return found
}

// buildTestImage builds testdata/exit0 statically and packs it into testImage's tarball.
func buildTestImage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "exit0")
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", bin, "./testdata/exit0")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building testdata/exit0: %v: %s", err, out)
	}
	tarball := filepath.Join(dir, "image.tar")
	layer := ociimage.Layer{{Path: "/exit0", HostPath: bin}}
	if err := ociimage.Build(testImage, []ociimage.Layer{layer}, ociimage.Config{Entrypoint: []string{"/exit0"}}, tarball); err != nil {
		t.Fatal(err)
	}
	return tarball
}

// exitPod runs testImage with args, as runner pods run on the local stack: host
// network, never pulled, restarted whenever it exits.
func exitPod(ns, name string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "main", Image: testImage, ImagePullPolicy: corev1.PullNever, Args: args,
			}},
		},
	}
}

func waitPodState(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod, limit time.Duration, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return ok(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not %s after %s: status %+v", pod.Namespace, pod.Name, what, limit, last)
	}
	return last
}

// processesMentioning lists the processes whose command line contains s.
// awaitProcesses waits up to 5 s for n processes mentioning s: a container is
// reported running once runc started it, and its init execs the container's
// binary a moment later.
func awaitProcesses(s string, n int) []string {
	procs := processesMentioning(s)
	for deadline := time.Now().Add(5 * time.Second); len(procs) != n && time.Now().Before(deadline); procs = processesMentioning(s) {
		time.Sleep(50 * time.Millisecond)
	}
	return procs
}

func processesMentioning(s string) []string {
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(strings.TrimRight(string(raw), "\x00"), "\x00", " ")
		if strings.Contains(cmdline, s) {
			found = append(found, fmt.Sprintf("%d: %s", pid, cmdline))
		}
	}
	return found
}

// mountsUnder lists this machine's mount points in dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			found = append(found, f[4])
		}
	}
	return found
}

// testWriter sends a stack's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
