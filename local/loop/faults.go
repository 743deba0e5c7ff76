package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// Faults of the node, for the chaos suite, each done the way the kernel, a person
// or a cluster operator does it on a real node. Each fault aimed at a runner pod
// records itself in the monitor (Monitor.Fault) before it is injected, so that
// exactly the runners it hits are excused.

// RunnerPods returns the pools' pods whose runner container is running and that
// are not being deleted, with the job each one's runner is running (0: idle), as
// the simulator says.
func (l *Loop) RunnerPods(ctx context.Context) ([]corev1.Pod, map[string]int64, error) {
	busy := map[string]int64{}
	for _, j := range l.Sim.RunningJobs() {
		busy[j.RunnerName] = j.ID
	}
	var out []corev1.Pod
	seen := map[string]bool{}
	for _, p := range l.Pools().Pools {
		ns := p.Kubernetes.Namespace
		if seen[ns] {
			continue
		}
		seen[ns] = true
		pods, err := l.opts.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: runnerpod.LabelPool})
		if err != nil {
			return nil, nil, err
		}
		for _, pod := range pods.Items {
			if cs := containerStatus(&pod); pod.DeletionTimestamp == nil && cs.State.Running != nil && cs.ContainerID != "" {
				out = append(out, pod)
			}
		}
	}
	return out, busy, nil
}

// KillRunnerProcess kills the runner process of pod's runner container — run.sh,
// the fake Runner.Listener — with SIGKILL, found from the host through /proc by
// the container's cgroup, as a crash of the runner would end it. Its job's
// worker sees the listener go and cancels the job; the entrypoint exits with the
// runner's code and the kubelet restarts the container.
func (l *Loop) KillRunnerProcess(pod *corev1.Pod) error {
	id := containerID(pod)
	pids, err := containerPIDs(id)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if base := argv0(pid); base == "run.sh" || base == "Runner.Listener" {
			l.Monitor.Fault(pod.Name, "runner process killed")
			l.fault(func(f *Faults) { f.RunnerKills++ })
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				return fmt.Errorf("killing the runner of pod %s (pid %d): %w", pod.Name, pid, err)
			}
			return nil
		}
	}
	return fmt.Errorf("pod %s: no runner process in container %s (processes %v)", pod.Name, id, pids)
}

// maxOOMLimit: OOMKill refuses containers with a larger (or no) memory limit,
// since its allocation would take the machine's memory instead.
const maxOOMLimit = 512 << 20

// OOMKill makes the kernel's OOM killer kill pod's runner container, which must
// have a memory limit of at most maxOOMLimit: a process charged to the
// container's memory cgroup allocates beyond the limit. (It is a process of this
// machine put into that cgroup rather than one started in the container with
// `ctr tasks exec`, which takes seconds to start on a loaded machine, by when a
// job of 1–3 s is over: for the OOM killer, whose scope is the cgroup, it is the
// same.) On this cgroup v1 machine the OOM killer kills one process of the
// cgroup, the one with the highest score; the container's init (tini) is made
// that one (oom_score_adj 1000, every other process 0), so the whole container
// dies with its init, as on a cgroup v2 node, where the kubelet makes the OOM
// killer kill the whole cgroup. A score is the process's pages plus
// oom_score_adj × (the limit's pages / 1000), that division truncated: with a
// limit of a multiple of 1000 pages (4,096,000 bytes), init's score exceeds the
// allocation's, which holds less than the limit; with another limit the
// allocation may be the one killed, and OOMKill fails. It succeeds (and counts in
// Faults.OOMKills) once the init is gone and the kernel counted an OOM kill. The
// kubelet reports the container OOMKilled (exit code 137) and restarts it; the
// job's worker died with it, and the simulator fails the job (failLostJobs).
func (l *Loop) OOMKill(ctx context.Context, pod *corev1.Pod) error {
	id := containerID(pod)
	pids, err := containerPIDs(id)
	if err != nil {
		return err
	}
	cgroup, limit, err := memoryCgroup(pids[0])
	if err != nil || limit > maxOOMLimit {
		return fmt.Errorf("pod %s: an OOM kill needs a memory limit of at most %d bytes (limit %d, %v)", pod.Name, maxOOMLimit, limit, err)
	}
	init := 0
	for _, pid := range pids {
		if nsPID(pid) == 1 {
			init = pid
		}
	}
	if init == 0 {
		return fmt.Errorf("pod %s: no init process in container %s", pod.Name, id)
	}
	l.Monitor.Fault(pod.Name, "OOM kill")
	kills := oomKills()
	for _, pid := range pids {
		if pid != init {
			_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte("0"), 0)
		}
	}
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", init), []byte("1000"), 0); err != nil {
		return fmt.Errorf("pod %s: raising its init's OOM score: %w", pod.Name, err)
	}
	// The allocation joins the cgroup, gives up its score, then fills 1 GiB: the
	// OOM killer kills the container's init, then, once the container is gone,
	// the allocation itself.
	alloc := exec.CommandContext(ctx, "/bin/sh", "-c",
		`echo $$ >"$1" && echo 0 >/proc/self/oom_score_adj && exec dd if=/dev/zero of=/dev/null bs=1G count=1 2>/dev/null`,
		"sh", filepath.Join(cgroup, "cgroup.procs"))
	if err := alloc.Start(); err != nil {
		return fmt.Errorf("pod %s: starting the allocation: %w", pod.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = alloc.Wait()
		close(done)
	}()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !exited(init) {
			continue
		}
		if oomKills() == kills {
			return fmt.Errorf("pod %s: its init exited, but the kernel counted no OOM kill", pod.Name)
		}
		l.fault(func(f *Faults) { f.OOMKills++ })
		return nil
	}
	_ = alloc.Process.Kill()
	<-done
	return fmt.Errorf("pod %s: the OOM killer spared the container's init", pod.Name)
}

// oomKills is the kernel's count of OOM kills (/proc/vmstat oom_kill).
func oomKills() int64 {
	raw, _ := os.ReadFile("/proc/vmstat")
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

// exited reports whether process pid is gone.
func exited(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return errors.Is(err, os.ErrNotExist)
}

// DeletePod deletes pod as a person would (its grace period, no preconditions).
func (l *Loop) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	l.Monitor.Fault(pod.Name, "deleted by hand")
	l.fault(func(f *Faults) { f.PodDeletes++ })
	err := l.opts.Kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// DrainOptions tune Drain.
type DrainOptions struct {
	// Cordon marks the node unschedulable for the drain and until Hold after
	// it, then schedulable again, as `kubectl drain` (and uncordon) does. The
	// node is shared with other tests: a test that does not need it leaves it off.
	Cordon bool
	Hold   time.Duration
	// Timeout bounds the wait for a pod whose eviction is refused (429): it is
	// given up on then, and reported (default 60s).
	Timeout time.Duration
	// Retry is the time between two evictions of a pod refused (default 1s).
	Retry time.Duration
}

// Eviction is one answer of the eviction API to a drain.
type Eviction struct {
	Pod string
	At  time.Time
	// Code is 201 (evicted), 429 (refused: a disruption budget), 404 (the pod
	// was gone), or 0 with Err.
	Code int
	Err  error
}

// DrainReport is what a drain did.
type DrainReport struct {
	Evicted []string // pods whose eviction was accepted
	Gone    []string // pods gone before an eviction of theirs was accepted
	GaveUp  []string // pods still refused at the timeout
	// Answers are the eviction API's answers, in the order they came.
	Answers []Eviction
}

// Drain drains the node of the pools' runner pods as `kubectl drain` does:
// each pod running on it when the drain starts is evicted through the eviction
// API (policy/v1), all at once; a pod whose eviction is refused (429: a
// disruption budget — a busy runner's) is tried again every Retry until its
// eviction is accepted, the pod is gone, or Timeout has passed (then the drain
// gives up on it, as `kubectl drain --timeout` does, and reports it). Only the
// pools' pods are evicted: the node is shared with other tests. Each accepted
// eviction is a fault the monitor excuses for that pod; a refused one is not:
// it did nothing to the pod.
func (l *Loop) Drain(ctx context.Context, node string, o DrainOptions) (DrainReport, error) {
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	l.fault(func(f *Faults) { f.Drains++ })
	if o.Cordon {
		if err := l.cordon(ctx, node, true); err != nil {
			return DrainReport{}, err
		}
		defer func() { _ = l.cordon(context.WithoutCancel(ctx), node, false) }()
	}
	pods, _, err := l.RunnerPods(ctx)
	if err != nil {
		return DrainReport{}, err
	}
	d := &drain{l: l, o: o, deadline: time.Now().Add(o.Timeout)}
	var wg sync.WaitGroup
	for _, pod := range pods {
		if pod.Spec.NodeName == node {
			wg.Go(func() { d.evict(ctx, pod) })
		}
	}
	wg.Wait()
	if o.Cordon {
		select {
		case <-ctx.Done():
		case <-time.After(o.Hold):
		}
	}
	return d.report, errors.Join(d.errs...)
}

// drain is one Drain under way.
type drain struct {
	l        *Loop
	o        DrainOptions
	deadline time.Time
	mu       sync.Mutex
	report   DrainReport
	errs     []error
}

// evictedFault is what the monitor records of an accepted eviction.
const evictedFault = "evicted by a node drain"

// evict evicts pod until the eviction API accepts it, the pod is gone, or the
// drain's deadline has passed.
func (d *drain) evict(ctx context.Context, pod corev1.Pod) {
	for {
		// Recorded before the eviction, which the monitor may see before the
		// answer comes; withdrawn when the eviction was not accepted.
		d.l.Monitor.Fault(pod.Name, evictedFault)
		err := d.l.opts.Kube.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			// The pod as listed: a newer pod of the same name is not evicted.
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}})
		if err != nil {
			d.l.Monitor.Withdraw(pod.Name, evictedFault)
		}
		done := d.answer(pod.Name, err)
		if done {
			return
		}
		if time.Now().Add(d.o.Retry).After(d.deadline) {
			d.note(func(r *DrainReport) { r.GaveUp = append(r.GaveUp, pod.Name) })
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d.o.Retry):
		}
	}
}

// answer records the eviction API's answer for pod; true when the pod needs no
// other eviction.
func (d *drain) answer(pod string, err error) bool {
	a := Eviction{Pod: pod, At: time.Now(), Err: err}
	switch {
	case err == nil:
		a.Code = http.StatusCreated
		d.l.fault(func(f *Faults) { f.Evictions++ })
		d.note(func(r *DrainReport) { r.Evicted = append(r.Evicted, pod) })
	case apierrors.IsTooManyRequests(err):
		a.Code = http.StatusTooManyRequests
		d.l.fault(func(f *Faults) { f.EvictionsRefused++ })
	case apierrors.IsNotFound(err), apierrors.IsConflict(err): // gone, or another pod of its name
		a.Code = http.StatusNotFound
		d.note(func(r *DrainReport) { r.Gone = append(r.Gone, pod) })
	default:
		d.mu.Lock()
		d.errs = append(d.errs, fmt.Errorf("evicting %s: %w", pod, err))
		d.mu.Unlock()
	}
	d.note(func(r *DrainReport) { r.Answers = append(r.Answers, a) })
	return a.Code != http.StatusTooManyRequests
}

func (d *drain) note(f func(*DrainReport)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(&d.report)
}

func (l *Loop) cordon(ctx context.Context, node string, on bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
	if _, err := l.opts.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cordoning node %s (%v): %w", node, on, err)
	}
	return nil
}

// PauseSweeps throttles the sweeper for d, as Lambda does when a function is out
// of concurrency: no scheduled sweep and no nudge runs meanwhile. Ephemeral
// runners that finish during it are restarted by the kubelet (their container
// exited 0, restartPolicy Always) before the sweeper removes them.
func (l *Loop) PauseSweeps(d time.Duration) {
	l.fault(func(f *Faults) { f.SweeperPauses++ })
	l.pausedUntil.Store(time.Now().Add(d).UnixNano())
}

// containerID is the runtime's id of pod's runner container ("" when it has none).
func containerID(pod *corev1.Pod) string {
	_, id, _ := strings.Cut(containerStatus(pod).ContainerID, "://")
	return id
}

// containerPIDs lists the host pids of the processes in container id's cgroup.
func containerPIDs(id string) ([]int, error) {
	if id == "" {
		return nil, errors.New("no container id")
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err == nil && bytes.Contains(raw, []byte("/"+id+"\n")) {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("no process in container %s", id)
	}
	return pids, nil
}

// argv0 is the base name a process was started as.
func argv0(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	first, _, _ := bytes.Cut(raw, []byte{0})
	return filepath.Base(string(first))
}

// nsPID is pid's process id in its own pid namespace (the last NSpid field).
func nsPID(pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	return 0
}

// memoryCgroup is the directory of the cgroup v1 memory controller process pid
// is in, and that cgroup's limit.
func memoryCgroup(pid int) (string, int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "memory") {
			dir := filepath.Join("/sys/fs/cgroup/memory", f[2])
			v, err := os.ReadFile(filepath.Join(dir, "memory.limit_in_bytes"))
			if err != nil {
				return "", 0, err
			}
			limit, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
			return dir, limit, err
		}
	}
	return "", 0, errors.New("no memory cgroup (this needs cgroup v1)")
}

// BusyRunnerPod picks, from pods, one whose runner is running a job (the
// simulator's truth), else any; false when pods is empty.
func BusyRunnerPod(pods []corev1.Pod, busy map[string]int64, pick func(n int) int) (corev1.Pod, bool) {
	var withJob []corev1.Pod
	for _, p := range pods {
		if busy[p.Name] != 0 {
			withJob = append(withJob, p)
		}
	}
	switch {
	case len(withJob) > 0:
		return withJob[pick(len(withJob))], true
	case len(pods) > 0:
		return pods[pick(len(pods))], true
	}
	return corev1.Pod{}, false
}
