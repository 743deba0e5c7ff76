// Package runnername is how a pool's runners are named: a runner (its
// StatefulSet and credentials Secret) is `<pool>-xxxxx`, like a Kubernetes
// generateName, and its only pod, whose name is also its GitHub runner's,
// `<pool>-xxxxx-0`. It imports only the standard library, so that the webhook
// can tell a pool's runners from others without linking the Kubernetes client.
package runnername

import (
	"crypto/rand"
	"strings"
)

const (
	// alphabet is Kubernetes' generateName alphabet.
	alphabet = "bcdfghjklmnpqrstvwxz2456789"
	// randomLen is the length of the random part.
	randomLen = 5
	// podSuffix turns a runner's name into its pod's (a StatefulSet's pod 0).
	podSuffix = "-0"
)

// New returns a fresh runner name for the pool: `<pool>-xxxxx`.
func New(pool string) string {
	b := make([]byte, randomLen)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return pool + "-" + string(b)
}

// Pod is the name of the runner's only pod, and of its GitHub runner.
func Pod(runner string) string { return runner + podSuffix }

// FromPod is the name of the runner whose pod is pod (the inverse of Pod).
func FromPod(pod string) string { return strings.TrimSuffix(pod, podSuffix) }

// IsPodOf reports whether pod has the shape of the pool's runner pods,
// `<pool>-xxxxx-0`. It checks the shape only, not the alphabet.
func IsPodOf(pool, pod string) bool {
	rest, ok := strings.CutPrefix(pod, pool+"-")
	return ok && len(rest) == randomLen+len(podSuffix) && strings.HasSuffix(rest, podSuffix)
}
