// Command pause is the local stack's pod sandbox process, in place of
// registry.k8s.io/pause (no registry is reachable): it holds a pod's namespaces,
// reaps the zombies it inherits when it is the pod's PID 1 (shareProcessNamespace),
// and exits 0 on SIGTERM or SIGINT. The stack builds it static (CGO_ENABLED=0)
// into the image its containerd's sandbox_image names.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
