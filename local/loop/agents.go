package loop

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// agents is the kubelet and the runner agents of every runner pod.
type agents struct {
	loop  *Loop
	mu    sync.Mutex
	byPod map[string]*agent // pod UID → its agent
	wg    sync.WaitGroup
	// lived sums the time runner agents were up (registered until exit).
	lived time.Duration
}

// agent is one runner process in a running pod.
type agent struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	job    int64 // the job it runs, 0 when idle
	pod    string
	pool   string
}

// kubelet polls the pools' pods: it runs Pending pods after the start delay, starts
// an agent in each running pod, and stops the agent of a pod being deleted —
// recording a violation if that agent was running a job.
func (as *agents) kubelet(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i := range as.loop.Pools().Pools {
			p := &as.loop.Pools().Pools[i]
			pods, err := as.loop.opts.Kube.CoreV1().Pods(p.Kubernetes.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runnerpod.LabelPool + "=" + p.Name})
			if err != nil {
				continue
			}
			seen := map[string]bool{}
			for j := range pods.Items {
				seen[string(pods.Items[j].UID)] = true
				as.tick(ctx, p, &pods.Items[j])
			}
			as.forgetGone(p, seen)
		}
	}
}

func (as *agents) tick(ctx context.Context, p *pool.Pool, pod *corev1.Pod) {
	uid := string(pod.UID)
	as.mu.Lock()
	a := as.byPod[uid]
	as.mu.Unlock()
	switch {
	case pod.DeletionTimestamp != nil:
		if a != nil {
			as.kill(uid, a, "deleted")
		}
	case pod.Status.Phase != corev1.PodRunning && time.Since(pod.CreationTimestamp.Time) >= as.loop.opts.StartDelay:
		now := metav1.Now()
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: runnerpod.ContainerName, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
		_, _ = as.loop.opts.Kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	case pod.Status.Phase == corev1.PodRunning && a == nil && !exited(pod):
		actx, cancel := context.WithCancel(ctx)
		a = &agent{cancel: cancel, pod: pod.Name, pool: p.Name}
		as.mu.Lock()
		as.byPod[uid] = a
		as.mu.Unlock()
		as.wg.Go(func() { as.run(actx, p, pod, a) })
	}
}

// forgetGone stops agents whose pods disappeared without our seeing them deleted.
func (as *agents) forgetGone(p *pool.Pool, seen map[string]bool) {
	as.mu.Lock()
	var gone []string
	for uid, a := range as.byPod {
		if !seen[uid] && a.pool == p.Name {
			gone = append(gone, uid)
		}
	}
	as.mu.Unlock()
	for _, uid := range gone {
		as.mu.Lock()
		a := as.byPod[uid]
		as.mu.Unlock()
		if a != nil {
			as.kill(uid, a, "gone")
		}
	}
}

func (as *agents) kill(uid string, a *agent, how string) {
	a.mu.Lock()
	if a.job != 0 {
		as.loop.Monitor.Violate("pod %s %s while its runner ran job %d", a.pod, how, a.job)
		a.job = 0
	}
	a.mu.Unlock()
	a.cancel()
	as.mu.Lock()
	if how == "gone" {
		delete(as.byPod, uid)
	}
	as.mu.Unlock()
}

func exited(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == runnerpod.ContainerName && cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

// run is the runner agent: register with the pod's credentials, take matching
// jobs, and (ephemeral) exit 0 after one.
func (as *agents) run(ctx context.Context, p *pool.Pool, pod *corev1.Pod, a *agent) {
	sim := as.loop.Sim
	name := strings.TrimSuffix(pod.Name, "-0")
	sec, err := as.loop.opts.Kube.CoreV1().Secrets(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return // the kubelet would retry: the pod stays without a runner
	}
	rn, err := sim.Register(githubsim.Registration{
		JITConfig: string(sec.Data[runnerpod.SecretJITConfig]), Token: string(sec.Data[runnerpod.SecretToken]),
		Scope: p.Scope().String(), Name: pod.Name, Labels: p.AllLabels(), Ephemeral: p.IsEphemeral(),
	})
	if err != nil {
		as.exit(ctx, pod, 1)
		return
	}
	up := time.Now()
	defer func() {
		as.mu.Lock()
		as.lived += time.Since(up)
		as.mu.Unlock()
	}()
	for {
		job, ok, err := sim.AcquireJob(rn.ID)
		if errors.Is(err, githubsim.ErrRunnerGone) {
			as.exit(ctx, pod, 0) // unregistered: the runner process ends
			return
		}
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		a.mu.Lock()
		a.job = job.ID
		a.mu.Unlock()
		as.loop.opts.Log.Debug("agent took a job", "pod", pod.Name, "uid", pod.UID, "runner", rn.ID, "job", job.ID)
		select {
		case <-ctx.Done():
			return // killed mid-job: kill() recorded the violation
		case <-time.After(job.Duration):
		}
		sim.CompleteJob(job.ID)
		a.mu.Lock()
		a.job = 0
		a.mu.Unlock()
		if p.IsEphemeral() {
			as.exit(ctx, pod, 0)
			return
		}
	}
}

// exit marks the runner container terminated with code, retrying when the pod
// changed meanwhile (the sweeper annotates pods): a lost update would leave a pod
// that looks alive with no runner in it.
func (as *agents) exit(ctx context.Context, pod *corev1.Pod, code int32) {
	kube := as.loop.opts.Kube
	for range 20 {
		cur, err := kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || cur.UID != pod.UID {
			return
		}
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: runnerpod.ContainerName, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.Now()}}}}
		if _, err = kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil || !apierrors.IsConflict(err) {
			return
		}
	}
}

func (as *agents) wait() { as.wg.Wait() }

// RunnerTime is the total time runner agents were up so far (finished ones).
func (l *Loop) RunnerTime() time.Duration {
	l.agents.mu.Lock()
	defer l.agents.mu.Unlock()
	return l.agents.lived
}
