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
