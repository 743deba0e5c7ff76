package runnerpod

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// The registration token of a token runner (pool.UsesToken) reaches its
// container as a file, never as an environment variable: the runner's Secret
// is mounted at TokenDir, inside the state directory, and the entrypoint is
// told where the file is (RUNNER_TOKEN_FILE). A variable set by the kubelet is
// in the initial environment of the container's first process, which
// /proc/1/environ shows for the process's life — to root, and to its own user —
// even after the entrypoint unsets it; a file is read by config.sh alone, and
// the state directory, which the entrypoint makes root's alone before anything
// runs as the runner user, keeps the jobs from opening it. Once GitHub lists the
// runner, the sweeper removes the token from the Secret (package reconcile) and
// the kubelet removes the file at its next sync of the pod (a minute or so): a
// restarted container needs no token then, since a persistent runner resumes
// the registration it kept and an ephemeral one exits on its run marker
// (runner/entrypoint.sh).
const (
	TokenVolume = "runner-registration"
	TokenDir    = StateDir + "/registration"
	TokenFile   = TokenDir + "/" + SecretToken
)

// addTokenFile mounts the runner's Secret (secret) read-only at TokenDir in the
// runner container (index runner), after the state volume it is inside of. The
// file is readable by anyone who reaches it (0444): the container's user, when a
// template chooses one, must read it too; the state directory keeps the others out.
func addTokenFile(spec *corev1.PodSpec, runner int, secret string) {
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: TokenVolume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To[int32](0o444)}}})
	c := &spec.Containers[runner]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: TokenVolume, MountPath: TokenDir, ReadOnly: true})
	c.Env = append(c.Env, corev1.EnvVar{Name: "RUNNER_TOKEN_FILE", Value: TokenFile})
}

// tokenReadable finds, in the pod spec Template built for a pool that uses the
// registration token, a setting with which its jobs can read the token, and
// refuses it in pool.TokenReadable's words unless the pool accepts the risk. The
// entrypoint keeps the token from the jobs only when it runs as root and the
// jobs run as another user with no way back to root and no Kubernetes
// credential (runner/README.md). The pool's docker settings are package pool's
// to refuse; a privileged runner container that dockerdWithinRunnerContainer
// made is not reported again.
func tokenReadable(p *pool.Pool, spec corev1.PodSpec) error {
	i := runnerIndex(spec.Containers)
	c := spec.Containers[i]
	sc := ptr.Deref(c.SecurityContext, corev1.SecurityContext{})
	podSC := ptr.Deref(spec.SecurityContext, corev1.PodSecurityContext{})
	container := fmt.Sprintf("spec.containers[%d].securityContext.", i)
	const (
		sameUser = "every job step runs as the entrypoint's own user, and can read what the entrypoint reads, the token's file included"
		escalate = "a job step may become root through a setuid program (sudo), and root reads every process's environment and file"
	)
	inTemplate := func(path, how string) error { return p.TokenReadable("kubernetes.template: "+path, how) }
	switch {
	case sc.RunAsUser != nil && *sc.RunAsUser != 0:
		return inTemplate(container+"runAsUser", sameUser)
	case ptr.Deref(sc.RunAsNonRoot, false):
		return inTemplate(container+"runAsNonRoot", sameUser)
	case sc.RunAsUser == nil && podSC.RunAsUser != nil && *podSC.RunAsUser != 0:
		return inTemplate("spec.securityContext.runAsUser", sameUser)
	case ptr.Deref(podSC.RunAsNonRoot, false):
		return inTemplate("spec.securityContext.runAsNonRoot", sameUser)
	case ptr.Deref(sc.AllowPrivilegeEscalation, true) && !p.Kubernetes.DockerdWithinRunnerContainer:
		// Left true (or unset, which is true) by protectCredentials only when the
		// template sets it, or the container is privileged or adds CAP_SYS_ADMIN.
		field := "allowPrivilegeEscalation"
		switch {
		case sc.AllowPrivilegeEscalation != nil:
		case ptr.Deref(sc.Privileged, false):
			field = "privileged"
		case sc.Capabilities != nil && slices.Contains(sc.Capabilities.Add, "CAP_SYS_ADMIN"):
			field = "capabilities.add"
		}
		return inTemplate(container+field, escalate)
	case spec.HostPID:
		return inTemplate("spec.hostPID", "a job step sees the node's processes, among them other runners' config.sh, "+
			"which runs as the runner user with the token in its environment")
	case ptr.Deref(spec.AutomountServiceAccountToken, true):
		// Left unset by protectCredentials only when a service account is named.
		const how = "every job step gets the service account's Kubernetes token, and whatever may read the runners' Secrets " +
			"(or create a pod that mounts them) with it reads the token; automountServiceAccountToken: false keeps the " +
			"account's other uses, such as an IAM role"
		switch {
		case spec.AutomountServiceAccountToken != nil:
			return inTemplate("spec.automountServiceAccountToken", how)
		case p.Kubernetes.ServiceAccountName != "":
			return p.TokenReadable("kubernetes.serviceAccountName", how)
		}
		return inTemplate("spec.serviceAccountName", how)
	}
	return nil
}
