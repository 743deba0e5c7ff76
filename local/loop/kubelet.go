package loop

import (
	"context"

	"github.com/runnerscaler/runnerscaler/local/stack"
)

// RestartKubelet restarts the node's kubelet as `systemctl restart kubelet` does
// on a real node (stack.RestartKubelet on the stack in stackDir, whose API server
// must be the loop's), and counts in Faults.KubeletRestarts. It excuses no pod
// (Monitor.Fault): the runner containers keep running across a kubelet restart,
// and their jobs with them, so a runner that stops or a job that fails meanwhile
// is a violation. It returns once the new kubelet has reported the node Ready.
func (l *Loop) RestartKubelet(ctx context.Context, stackDir string) error {
	l.fault(func(f *Faults) { f.KubeletRestarts++ })
	return stack.RestartKubelet(ctx, stackDir)
}
