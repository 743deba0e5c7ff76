package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// EphemeralVolumes plays, for the pods of namespace ns and until the test
// ends, the controllers a generic ephemeral volume needs and the local stack's
// controller-manager does not run: the ephemeral-volume controller (a claim
// <pod>-<volume> from the volume's template, owned by the pod), a provisioner
// and the persistent-volume binder (a hostPath volume in a directory of its
// own under dir, both bound), and pvc-protection (a claim being deleted loses
// its kubernetes.io/pvc-protection finalizer once no running pod uses it). The
// garbage collector, which the stack runs, deletes a claim once its pod is
// gone. The volumes are deleted at the end of the test.
func EphemeralVolumes(t testing.TB, cs kubernetes.Interface, ns, dir string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var made []string // PersistentVolume names
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := ephemeralPass(ctx, cs, ns, dir, &made); err != nil && ctx.Err() == nil {
				t.Logf("testenv: ephemeral volumes in %s: %v", ns, err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		for _, pv := range made {
			_, _ = cs.CoreV1().PersistentVolumes().Patch(context.Background(), pv, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			_ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), pv, metav1.DeleteOptions{})
		}
	})
}

func ephemeralPass(ctx context.Context, cs kubernetes.Interface, ns, dir string, made *[]string) error {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	inUse := map[string]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		terminated := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
		for _, v := range pod.Spec.Volumes {
			switch {
			case v.PersistentVolumeClaim != nil && !terminated:
				inUse[v.PersistentVolumeClaim.ClaimName] = true
			case v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil:
				claim := pod.Name + "-" + v.Name
				if !terminated {
					inUse[claim] = true
				}
				if pod.DeletionTimestamp == nil {
					if err := ensureEphemeralClaim(ctx, cs, pod, v, claim, dir, made); err != nil {
						return err
					}
				}
			}
		}
	}
	claims, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, c := range claims.Items {
		if c.DeletionTimestamp != nil && !inUse[c.Name] && slices.Contains(c.Finalizers, "kubernetes.io/pvc-protection") {
			fin := slices.DeleteFunc(slices.Clone(c.Finalizers), func(f string) bool { return f == "kubernetes.io/pvc-protection" })
			c.Finalizers = fin
			if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Update(ctx, &c, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	return nil
}

// ensureEphemeralClaim makes the pod's claim for volume v, with a bound hostPath volume.
func ensureEphemeralClaim(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, v corev1.Volume, name, dir string, made *[]string) error {
	claims := cs.CoreV1().PersistentVolumeClaims(pod.Namespace)
	if _, err := claims.Get(ctx, name, metav1.GetOptions{}); err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	tmpl := v.Ephemeral.VolumeClaimTemplate
	yes := true
	pvName := fmt.Sprintf("%s-%s", pod.Namespace, name)
	spec := *tmpl.Spec.DeepCopy()
	spec.VolumeName = pvName
	claim, err := claims.Create(ctx, &corev1.PersistentVolumeClaim{
		// bind-completed: the scheduler takes a claim for bound only with it.
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: tmpl.Labels, Annotations: merged(tmpl.Annotations, "pv.kubernetes.io/bind-completed", "yes"),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating claim %s: %w", name, err)
	}
	path := filepath.Join(dir, pvName)
	if err := os.MkdirAll(path, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(path, 0o777); err != nil { // the runner's user writes there
		return err
	}
	size := spec.Resources.Requests[corev1.ResourceStorage]
	if size.IsZero() {
		size = resource.MustParse("1Gi")
	}
	class := ""
	if spec.StorageClassName != nil {
		class = *spec.StorageClassName
	}
	hostPath := corev1.HostPathDirectory
	pv, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: size}, AccessModes: spec.AccessModes,
			StorageClassName: class, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pod.Namespace, Name: name, UID: claim.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &hostPath}}}},
		metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating volume %s: %w", pvName, err)
	}
	*made = append(*made, pvName)
	pv.Status.Phase = corev1.VolumeBound
	if _, err := cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("binding volume %s: %w", pvName, err)
	}
	claim.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: spec.AccessModes,
		Capacity: corev1.ResourceList{corev1.ResourceStorage: size}}
	if _, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("binding claim %s: %w", name, err)
	}
	return nil
}

// merged is m with k=v (a new map).
func merged(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for mk, mv := range m {
		if mk != k {
			out[mk] = mv
		}
	}
	return out
}
