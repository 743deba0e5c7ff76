package runnerpod

import corev1 "k8s.io/api/core/v1"

// RunnerStatus is the status of pod's runner container (nil for a nil pod, or
// before the kubelet reported it).
func RunnerStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	if pod == nil {
		return nil
	}
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == ContainerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// InitWaiting is the status of the first init container of pod that waits
// for a reason other than its start: an image that cannot be pulled, a crash
// loop (the docker sidecar's, or one of the template's). While one does, the
// runner container waits too, as "PodInitializing", and this is why. nil when
// none does, or for a nil pod.
func InitWaiting(pod *corev1.Pod) *corev1.ContainerStatus {
	if pod == nil {
		return nil
	}
	for i := range pod.Status.InitContainerStatuses {
		cs := &pod.Status.InitContainerStatuses[i]
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return cs
		}
	}
	return nil
}
