package fakehook_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/local/fakehook"
	"github.com/runnerscaler/runnerscaler/local/runnerimage"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var (
	imagesOnce             sync.Once
	jobImage, runnerImage  string
	imagesErr              error
	jobTarball, runnerTarb string
)

// images builds the job and runner images and imports them into the node.
func images(t *testing.T) (job, runner string) {
	t.Helper()
	imagesOnce.Do(func() {
		var j, r runnerimage.Image
		if j, imagesErr = runnerimage.BuildJob(context.Background(), runnerimage.Options{}); imagesErr != nil {
			return
		}
		if r, imagesErr = runnerimage.Build(context.Background(), runnerimage.Options{}); imagesErr != nil {
			return
		}
		jobImage, runnerImage, jobTarball, runnerTarb = j.Ref, r.Ref, j.Tarball, r.Tarball
	})
	if imagesErr != nil {
		t.Fatalf("building the images: %v", imagesErr)
	}
	testenv.ImportImage(t, jobTarball)
	testenv.ImportImage(t, runnerTarb)
	return jobImage, runnerImage
}

// env is a namespace with a stand-in runner pod running on the node, its
// service account bound to rules, and the runner's directories on the host.
type env struct {
	cs        kubernetes.Interface
	ns        string
	runnerPod string
	node      string
	root      string // the runner's root: _work and externals
	cfg       fakehook.Config
	jobImage  string
}

func setup(t *testing.T, mode fakehook.Mode, rules []rbacv1.PolicyRule) *env {
	t.Helper()
	jobImg, runnerImg := images(t)
	cs, ns := testenv.Namespace(t)
	ctx := t.Context()
	e := &env{cs: cs, ns: ns, runnerPod: "runner-" + strings.TrimPrefix(testenv.Name("r"), "r-"), root: t.TempDir(), jobImage: jobImg}
	for _, d := range []string{"_work", "externals"} {
		if err := os.MkdirAll(filepath.Join(e.root, d), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.root, "externals", "node"), []byte("externals"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.ServiceAccountWithRole(t, cs, ns, "runner", rules)
	// The stand-in runner pod: what the hook reads for its node.
	runner := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: e.runnerPod},
		Spec: corev1.PodSpec{ServiceAccountName: "runner", Containers: []corev1.Container{{Name: "runner", Image: jobImg, ImagePullPolicy: corev1.PullNever}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, runner, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the runner pod: %v", err)
	}
	e.node = waitScheduled(t, cs, ns, e.runnerPod)
	e.cfg = fakehook.Config{Mode: mode, RunnerPod: e.runnerPod, Namespace: ns, ClaimName: e.runnerPod + "-work",
		RunnerImage: runnerImg, PrepareTimeout: 60 * time.Second,
		WorkDir: filepath.Join(e.root, "_work"), Externals: filepath.Join(e.root, "externals")}
	if mode == fakehook.Kubernetes {
		e.workClaim(t)
	}
	return e
}

// workClaim is the runner's work claim <R>-work, bound to a hostPath volume
// at the runner's _work, so that what the hook writes there the workflow pod
// sees at /__w, as with the runner pod's claim.
func (e *env) workClaim(t *testing.T) {
	ctx := t.Context()
	pvName := e.ns + "-work"
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	empty := ""
	claim, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: e.cfg.ClaimName},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: rwo, StorageClassName: &empty, VolumeName: pvName,
			Resources: corev1.VolumeResourceRequirements{Requests: size}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the work claim: %v", err)
	}
	hostPath := corev1.HostPathDirectory
	pv, err := e.cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{Capacity: size, AccessModes: rwo, StorageClassName: "",
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: e.ns, Name: claim.Name, UID: claim.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: e.cfg.WorkDir, Type: &hostPath}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the work volume: %v", err)
	}
	t.Cleanup(func() {
		_ = e.cs.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	// The local stack's controller-manager runs no persistentvolume-binder:
	// bind the two as it would (both statuses Bound), or the kubelet waits.
	pv.Status.Phase = corev1.VolumeBound
	if _, err := e.cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("binding the work volume: %v", err)
	}
	claim.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: rwo, Capacity: size}
	if _, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("binding the work claim: %v", err)
	}
}

func waitScheduled(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		p, err := cs.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading pod %s: %v", name, err)
		}
		if p.Spec.NodeName != "" {
			return p.Spec.NodeName
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pod %s was never scheduled", name)
	return ""
}

// hook is the hook as the runner pod's service account.
func (e *env) hook(t *testing.T, log *bytes.Buffer) *fakehook.Hook {
	t.Helper()
	h, err := fakehook.New(e.cfg, testenv.ServiceAccountRESTConfig(t, e.ns, "runner"), log, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (e *env) writeTemplate(t *testing.T, yaml string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	e.cfg.TemplatePath = p
}

const template = `
metadata:
  labels:
    team: ci
  annotations:
    example.com/owner: platform
spec:
  terminationGracePeriodSeconds: 7
  volumes:
  - name: scratch
    emptyDir: {}
  containers:
  - name: $job
    image: ignored/image
    env:
    - name: FROM_TEMPLATE
      value: "yes"
    volumeMounts:
    - name: scratch
      mountPath: /scratch
  - name: sidecar
    image: SIDECAR
    command: ["tail", "-f", "/dev/null"]
    imagePullPolicy: Never
`

// A container job in each mode: prepare_job creates the workflow pod as the
// hook's source does, run_script_step runs the script in its job container
// with the workspace there, cleanup_job leaves nothing labelled runner-pod.
func TestContainerJobInEachMode(t *testing.T) {
	for _, mode := range []fakehook.Mode{fakehook.Kubernetes, fakehook.NoVolume} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			e := setup(t, mode, fakehook.PolicyRules(mode))
			e.writeTemplate(t, strings.ReplaceAll(template, "SIDECAR", e.jobImage))
			// What the runner put in its workspace before the job: the
			// checkout the script reads (on the claim, or copied in).
			ws := filepath.Join(e.cfg.WorkDir, "app", "app")
			if err := os.MkdirAll(ws, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "checkout.txt"), []byte("from the runner\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			h := e.hook(t, &log)
			job := fakehook.Job{Repository: "acme/app", Container: fakehook.Container{Image: e.jobImage},
				Services: []fakehook.Container{{Image: e.jobImage}}}
			st, err := h.PrepareJob(t.Context(), job)
			if err != nil {
				t.Fatalf("prepare_job: %v\nlog: %s", err, log.String())
			}
			if want := e.runnerPod + "-workflow"; st.JobPod != want {
				t.Errorf("job pod %q, want %q", st.JobPod, want)
			}
			pod, err := e.cs.CoreV1().Pods(e.ns).Get(t.Context(), st.JobPod, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkPod(t, e, mode, pod)

			var out bytes.Buffer
			code, err := h.RunScriptStep(t.Context(), st, job, "pwd; cat checkout.txt; echo $FROM_TEMPLATE; test -d /__e; exit 3", &out)
			if err != nil {
				t.Fatalf("run_script_step: %v", err)
			}
			if want := "/__w/app/app\nfrom the runner\nyes\n"; code != 3 || out.String() != want {
				t.Errorf("script: exit %d, output %q; want 3, %q", code, out.String(), want)
			}

			if err := h.CleanupJob(t.Context()); err != nil {
				t.Fatalf("cleanup_job: %v", err)
			}
			sel := metav1.ListOptions{LabelSelector: "runner-pod=" + e.runnerPod}
			pods, err := e.cs.CoreV1().Pods(e.ns).List(t.Context(), sel)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					t.Errorf("pod %s left after cleanup_job", p.Name)
				}
			}
			secrets, err := e.cs.CoreV1().Secrets(e.ns).List(t.Context(), sel)
			if err != nil {
				t.Fatal(err)
			}
			if len(secrets.Items) != 0 {
				t.Errorf("%d secrets left after cleanup_job", len(secrets.Items))
			}
		})
	}
}

// checkPod compares the workflow pod with what the hook's source builds.
func checkPod(t *testing.T, e *env, mode fakehook.Mode, pod *corev1.Pod) {
	t.Helper()
	if got := pod.Labels; got["runner-pod"] != e.runnerPod || got["team"] != "ci" || len(got) != 2 {
		t.Errorf("labels %v, want runner-pod=%s and the template's team=ci", got, e.runnerPod)
	}
	if pod.Annotations["example.com/owner"] != "platform" {
		t.Errorf("annotations %v lack the template's", pod.Annotations)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %s", pod.Spec.RestartPolicy)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g != 7 {
		t.Errorf("terminationGracePeriodSeconds %v, want the template's 7", g)
	}
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	svc, _ := fakehook.ContainerName(e.jobImage)
	if want := []string{"job", svc, "sidecar"}; !slices.Equal(names, want) {
		t.Fatalf("containers %v, want %v", names, want)
	}
	job := pod.Spec.Containers[0]
	if job.Image != e.jobImage || !slices.Equal(job.Command, []string{"tail"}) || !slices.Equal(job.Args, []string{"-f", "/dev/null"}) {
		t.Errorf("job container %s %v %v, want the job image running tail -f /dev/null", job.Image, job.Command, job.Args)
	}
	if len(pod.Spec.Containers[1].Command) != 0 {
		t.Errorf("service command %v: the hook leaves a service's entrypoint alone", pod.Spec.Containers[1].Command)
	}
	envs := map[string]string{}
	for _, v := range job.Env {
		envs[v.Name] = v.Value
	}
	if envs["GITHUB_ACTIONS"] != "true" || envs["CI"] != "true" || envs["FROM_TEMPLATE"] != "yes" {
		t.Errorf("job env %v, want GITHUB_ACTIONS, CI and the template's FROM_TEMPLATE", envs)
	}
	mounts := map[string]string{}
	for _, m := range job.VolumeMounts {
		mounts[m.MountPath] = m.Name + ":" + m.SubPath
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	if _, ok := vols["scratch"]; !ok || mounts["/scratch"] != "scratch:" {
		t.Errorf("the template's volume and mount not appended: volumes %v, mounts %v", vols, mounts)
	}
	switch mode {
	case fakehook.Kubernetes:
		if pod.Spec.NodeName != e.node {
			t.Errorf("nodeName %q, want the runner's node %q", pod.Spec.NodeName, e.node)
		}
		if v := vols["work"]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != e.runnerPod+"-work" {
			t.Errorf("volume work %+v, want the claim %s-work", v, e.runnerPod)
		}
		want := map[string]string{"/__w": "work:", "/__e": "work:externals", "/github/home": "work:_temp/_github_home",
			"/github/workflow": "work:_temp/_github_workflow", "/scratch": "scratch:"}
		if !mapsEqual(mounts, want) {
			t.Errorf("job mounts %v, want %v", mounts, want)
		}
		if len(pod.Spec.InitContainers) != 0 {
			t.Errorf("init containers %v in kubernetes mode", pod.Spec.InitContainers)
		}
	case fakehook.NoVolume:
		for _, n := range []string{"externals", "github", "work"} {
			if vols[n].EmptyDir == nil {
				t.Errorf("volume %s %+v, want an emptyDir", n, vols[n])
			}
		}
		if pod.Spec.SecurityContext == nil || pod.Spec.SecurityContext.FSGroup == nil || *pod.Spec.SecurityContext.FSGroup != 1001 {
			t.Errorf("securityContext %+v, want fsGroup 1001", pod.Spec.SecurityContext)
		}
		if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].Name != "fs-init" || pod.Spec.InitContainers[0].Image != e.cfg.RunnerImage {
			t.Errorf("init containers %+v, want fs-init of the runner image", pod.Spec.InitContainers)
		}
		want := map[string]string{"/__e": "externals:", "/__w": "work:", "/github": "github:", "/scratch": "scratch:"}
		if !mapsEqual(mounts, want) {
			t.Errorf("job mounts %v, want %v", mounts, want)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The gate: with one gated verb missing from the Role (watch on pods/log,
// which the hook never calls), every command fails with the hook's message
// before touching anything.
func TestGateRefusesWithoutEveryVerb(t *testing.T) {
	rules := fakehook.PolicyRules(fakehook.NoVolume)
	for i, r := range rules {
		if slices.Equal(r.Resources, []string{"pods/log"}) {
			rules[i].Verbs = []string{"get", "list"}
		}
	}
	e := setup(t, fakehook.NoVolume, rules)
	h := e.hook(t, nil)
	_, err := h.PrepareJob(t.Context(), fakehook.Job{Repository: "acme/app", Container: fakehook.Container{Image: e.jobImage}})
	if !errors.Is(err, fakehook.ErrPermissions) || !strings.Contains(err.Error(), "The Service account needs the following permissions") ||
		!strings.Contains(err.Error(), "'"+e.ns+"' namespace") {
		t.Fatalf("prepare_job: %v, want the gate's refusal", err)
	}
	pods, err := e.cs.CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "runner-pod=" + e.runnerPod})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("the refused hook created %d pods", len(pods.Items))
	}
	if err := h.CleanupJob(t.Context()); !errors.Is(err, fakehook.ErrPermissions) {
		t.Errorf("cleanup_job: %v, want the gate's refusal", err)
	}
}

// A workflow pod that cannot start (its image is nowhere) fails prepare_job
// once the prepare timeout is spent, and the hook prunes it.
func TestPrepareFailsWhenThePodNeverRuns(t *testing.T) {
	e := setup(t, fakehook.NoVolume, fakehook.PolicyRules(fakehook.NoVolume))
	e.cfg.PrepareTimeout = 2 * time.Second
	h := e.hook(t, nil)
	_, err := h.PrepareJob(t.Context(), fakehook.Job{Repository: "acme/app", Container: fakehook.Container{Image: "localhost/nowhere/job:1"}})
	if err == nil || !strings.Contains(err.Error(), "pod failed to come online with error: Pod "+e.runnerPod+"-workflow is unhealthy with phase status Pending") {
		t.Fatalf("prepare_job: %v, want the hook's timeout", err)
	}
	p, err := e.cs.CoreV1().Pods(e.ns).Get(t.Context(), e.runnerPod+"-workflow", metav1.GetOptions{})
	if err == nil && p.DeletionTimestamp == nil {
		t.Errorf("the workflow pod of a failed prepare_job was not pruned")
	}
}

// Registry credentials become an immutable dockerconfigjson Secret labelled
// runner-pod, named R[0:47]-secret-<8>, the pod's imagePullSecret.
func TestRegistryCredentialsSecret(t *testing.T) {
	e := setup(t, fakehook.NoVolume, fakehook.PolicyRules(fakehook.NoVolume))
	h := e.hook(t, nil)
	st, err := h.PrepareJob(t.Context(), fakehook.Job{Repository: "acme/app", Container: fakehook.Container{Image: e.jobImage, Username: "u", Password: "p"}})
	if err != nil {
		t.Fatalf("prepare_job: %v", err)
	}
	secrets, err := e.cs.CoreV1().Secrets(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "runner-pod=" + e.runnerPod})
	if err != nil || len(secrets.Items) != 1 {
		t.Fatalf("secrets %v, %v: want one", secrets, err)
	}
	s := secrets.Items[0]
	if s.Type != corev1.SecretTypeDockerConfigJson || s.Immutable == nil || !*s.Immutable ||
		!strings.HasPrefix(s.Name, e.runnerPod[:min(47, len(e.runnerPod))]+"-secret-") || len(s.Name) != min(47, len(e.runnerPod))+len("-secret-")+8 {
		t.Errorf("secret %s type %s immutable %v", s.Name, s.Type, s.Immutable)
	}
	pod, err := e.cs.CoreV1().Pods(e.ns).Get(t.Context(), st.JobPod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.ImagePullSecrets) != 1 || pod.Spec.ImagePullSecrets[0].Name != s.Name {
		t.Errorf("imagePullSecrets %v, want %s", pod.Spec.ImagePullSecrets, s.Name)
	}
	if err := h.CleanupJob(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left, err := e.cs.CoreV1().Secrets(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "runner-pod=" + e.runnerPod}); err != nil || len(left.Items) != 0 {
		t.Errorf("secrets after cleanup_job: %v, %v", left, err)
	}
}
