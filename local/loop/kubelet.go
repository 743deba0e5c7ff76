package loop

import (
	"context"
	"slices"

	"github.com/runnerscaler/runnerscaler/local/stack"
)

// RestartKubelet restarts the node's kubelet as `systemctl restart kubelet` does
// on a real node (stack.RestartKubelet on the stack in stackDir, whose API server
// must be the loop's), and counts in Faults.KubeletRestarts. The runner
// containers keep running across a kubelet restart, and their jobs with them,
// so a runner that stops or a job that fails meanwhile is a violation — except
// a container job's (containerJobRunners): its steps, and the hooks' checks
// in prepare_job, run over exec, a stream the kubelet serves, which its restart
// cuts, as on a real node; the hook then fails the job. Those runners are
// excused (Monitor.Fault). It returns once the new kubelet has reported the
// node Ready.
func (l *Loop) RestartKubelet(ctx context.Context, stackDir string) error {
	l.fault(func(f *Faults) { f.KubeletRestarts++ })
	before := l.containerJobRunners()
	for _, r := range before {
		l.Monitor.Fault(r, kubeletCutExec)
	}
	err := stack.RestartKubelet(ctx, stackDir)
	// A container job that started meanwhile found no kubelet for its exec.
	for _, r := range l.containerJobRunners() {
		if !slices.Contains(before, r) {
			l.Monitor.Fault(r, kubeletCutExec)
		}
	}
	return err
}

// kubeletCutExec is what the monitor records of a kubelet restart for a
// runner running a container job.
const kubeletCutExec = "kubelet restarted under its container job's exec"

// containerJobRunners are the runners running a container job on a pool in
// container mode, as the simulator says.
func (l *Loop) containerJobRunners() []string {
	var out []string
	for _, j := range l.Sim.RunningJobs() {
		if p, _ := l.Pools().Route(routeOf(j), l.admits); p != nil && p.Kubernetes.InContainerMode() && j.Container != nil {
			out = append(out, j.RunnerName)
		}
	}
	return out
}
