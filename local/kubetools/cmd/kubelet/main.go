// Command kubelet is the upstream kubelet main, built from the Go module proxy; the
// local stack runs it as its one node, with containerd and runc from Debian.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() { os.Exit(cli.Run(app.NewKubeletCommand(context.Background()))) }
