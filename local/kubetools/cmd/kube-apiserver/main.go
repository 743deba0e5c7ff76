// Command kube-apiserver is the upstream kube-apiserver main, built from the Go module proxy.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones, as upstream

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
