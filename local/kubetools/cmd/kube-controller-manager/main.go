// Command kube-controller-manager is the upstream controller manager main, built from
// the Go module proxy; the local stack needs it for StatefulSets and garbage collection.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones, as upstream

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() { os.Exit(cli.Run(app.NewControllerManagerCommand())) }
