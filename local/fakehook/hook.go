package fakehook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// Hook runs the hook's commands against one API server as one identity (the
// runner pod's service account).
type Hook struct {
	cfg   Config
	kube  kubernetes.Interface
	rest  *rest.Config
	clock clock.WithTicker
	log   io.Writer // the job's log: the hook's warnings and the step's output
}

// New returns a hook for cfg that calls the API server of restConfig as its
// identity, logging to log (nil: discarded), waiting on clk (nil: the real clock).
func New(cfg Config, restConfig *rest.Config, log io.Writer, clk clock.WithTicker) (*Hook, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("fakehook: %w", err)
	}
	if log == nil {
		log = io.Discard
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Hook{cfg: cfg, kube: kube, rest: restConfig, clock: clk, log: log}, nil
}

// permission is one entry of the hook's requiredPermissions.
type permission struct {
	Group       string   `json:"group"`
	Verbs       []string `json:"verbs"`
	Resource    string   `json:"resource"`
	Subresource string   `json:"subresource"`
}

// RequiredPermissions is the gate of a release: requiredPermissions in
// H@0.7.0 and H@0.8.1 `packages/k8s/src/k8s/index.ts` (v0.8.1 drops batch/jobs).
func RequiredPermissions(m Mode) []permission {
	perms := []permission{
		{Group: "", Verbs: []string{"get", "list", "create", "delete"}, Resource: "pods"},
		{Group: "", Verbs: []string{"get", "create"}, Resource: "pods", Subresource: "exec"},
		{Group: "", Verbs: []string{"get", "list", "watch"}, Resource: "pods", Subresource: "log"},
	}
	if m == Kubernetes {
		perms = append(perms, permission{Group: "batch", Verbs: []string{"get", "list", "create", "delete"}, Resource: "jobs"})
	}
	return append(perms, permission{Group: "", Verbs: []string{"create", "delete", "get", "list"}, Resource: "secrets"})
}

// ErrPermissions is the gate's refusal: the hook exits 1 before any command.
var ErrPermissions = errors.New("the hook's permission gate refused")

// CheckPermissions is isAuthPermissionsOK and its refusal in run()
// (`packages/k8s/src/index.ts`, both releases): one SelfSubjectAccessReview per
// gated verb in the hook's namespace; any denied fails with the hook's message.
func (h *Hook) CheckPermissions(ctx context.Context) error {
	perms := RequiredPermissions(h.cfg.Mode)
	ok := true
	for _, p := range perms {
		for _, verb := range p.Verbs {
			review, err := h.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: h.cfg.Namespace, Verb: verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource}}}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("self subject access review: %w", err)
			}
			ok = ok && review.Status.Allowed
		}
	}
	if ok {
		return nil
	}
	list, _ := json.Marshal(perms)
	return fmt.Errorf("%w: The Service account needs the following permissions %s on the pod resource in the '%s' namespace. Please contact your self hosted runner administrator.",
		ErrPermissions, list, h.cfg.Namespace)
}

// State is prepare_job's response state: the workflow pod (state.jobPod).
type State struct {
	JobPod string
}

// PrepareJob is prepare_job (`packages/k8s/src/hooks/prepare-job.ts`): prune
// the runner's pods, build the workflow pod (kubernetes: pinned to the runner
// pod's node, the work claim; novolume: emptyDirs and fs-init), merge the
// template, create it (a registry secret first when the job container has
// credentials), wait until it runs, copy the workspace in (novolume), and run
// the alpine check. A failure after the pod's creation prunes the pods again.
func (h *Hook) PrepareJob(ctx context.Context, j Job) (State, error) {
	if err := h.CheckPermissions(ctx); err != nil {
		return State{}, err
	}
	if j.Container.Image == "" {
		return State{}, errors.New("Job Container is required.")
	}
	if err := h.prunePods(ctx); err != nil {
		return State{}, err
	}
	tmpl, err := h.readTemplate()
	if err != nil {
		return State{}, err
	}
	if h.cfg.Mode == Kubernetes {
		if err := copyDir(h.cfg.Externals, filepath.Join(h.cfg.WorkDir, "externals")); err != nil { // copyExternalsToRoot
			return State{}, fmt.Errorf("copying the runner's externals into the work volume: %w", err)
		}
	}
	pod, err := h.createWorkflowPod(ctx, j, tmpl)
	if err != nil {
		_ = h.prunePods(context.WithoutCancel(ctx))
		return State{}, fmt.Errorf("failed to create job pod: %w", err)
	}
	if err := h.waitRunning(ctx, pod.Name); err != nil {
		_ = h.prunePods(context.WithoutCancel(ctx))
		return State{}, fmt.Errorf("pod failed to come online with error: %w", err)
	}
	if h.cfg.Mode == NoVolume {
		if err := h.copyToPod(ctx, pod.Name, h.cfg.WorkDir, "/__w"); err != nil {
			return State{}, err
		}
	}
	// isPodContainerAlpine: only an exec that cannot run fails the job.
	if _, err := h.exec(ctx, pod.Name, []string{"sh", "-c", `[ $(cat /etc/*release* | grep -i -e "^ID=*alpine*" -c) != 0 ] || exit 1`}, nil, io.Discard); err != nil {
		return State{}, fmt.Errorf("failed to determine if the pod is alpine: %w", err)
	}
	return State{JobPod: pod.Name}, nil
}

// createWorkflowPod is createPod / createJobPod.
func (h *Hook) createWorkflowPod(ctx context.Context, j Job, tmpl map[string]any) (*corev1.Pod, error) {
	nodeName := ""
	if h.cfg.Mode == Kubernetes { // getCurrentNodeName
		runner, err := h.kube.CoreV1().Pods(h.cfg.Namespace).Get(ctx, h.cfg.RunnerPod, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if nodeName = runner.Spec.NodeName; nodeName == "" {
			return nil, errors.New("Failed to determine node name")
		}
	}
	pullSecret := ""
	if j.Container.Username != "" || j.Container.Password != "" {
		s, err := h.createRegistrySecret(ctx, j.Container)
		if err != nil {
			return nil, err
		}
		pullSecret = s
	}
	pod, err := h.workflowPod(j, nodeName, pullSecret)
	if err != nil {
		return nil, err
	}
	if pod, err = applyTemplate(pod, tmpl, h.warn); err != nil {
		return nil, err
	}
	return h.kube.CoreV1().Pods(h.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{})
}

// createRegistrySecret is createDockerSecret: an immutable dockerconfigjson
// Secret with one auths entry, labelled runner-pod=<R>.
func (h *Hook) createRegistrySecret(ctx context.Context, c Container) (string, error) {
	auth := map[string]any{"auths": map[string]any{defaultRegistryURL: map[string]string{
		"username": c.Username, "password": c.Password, "auth": basicAuth(c.Username, c.Password)}}}
	raw, err := json.Marshal(auth)
	if err != nil {
		return "", err
	}
	immutable := true
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName(h.cfg.RunnerPod, randomHex()), Namespace: h.cfg.Namespace,
			Labels: map[string]string{RunnerPodLabel: h.cfg.RunnerPod}},
		Immutable: &immutable, Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: raw},
	}
	created, err := h.kube.CoreV1().Secrets(h.cfg.Namespace).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return created.Name, nil
}

// The waits' backoff (k8s/k8s/index.ts BackOffManager): 1, 2, 4, 8, 16, then 20 s.
func backoff(prev time.Duration) time.Duration {
	if prev == 0 {
		return time.Second
	}
	return min(2*prev, 20*time.Second)
}

// waitRunning is waitForPodPhases(Running; backing off on Pending) with the
// prepare timeout: any other phase fails at once; the timeout is looked at
// after each sleep. As the hook, every failure reads "Pod … is unhealthy with
// phase status <the last phase seen>".
func (h *Hook) waitRunning(ctx context.Context, name string) error {
	phase := corev1.PodUnknown
	unhealthy := func() error { return fmt.Errorf("Pod %s is unhealthy with phase status %s", name, phase) }
	var slept, step time.Duration
	for {
		pod, err := h.kube.CoreV1().Pods(h.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return unhealthy()
		}
		if phase = pod.Status.Phase; phase == "" {
			phase = corev1.PodUnknown
		}
		switch phase {
		case corev1.PodRunning:
			return nil
		case corev1.PodPending:
		default:
			return unhealthy()
		}
		step = backoff(step)
		select {
		case <-h.clock.After(step):
		case <-ctx.Done():
			return unhealthy()
		}
		if slept += step; slept > h.cfg.PrepareTimeout {
			return unhealthy()
		}
	}
}

// RunScriptStep is run_script_step (`packages/k8s/src/hooks/run-script-step.ts`):
// the step's script, written where the runner writes it (its _work/_temp),
// runs as `sh -e /__w/_temp/<file>` in container job; in novolume the runner's
// _temp is copied in first (tar into /__w/_temp_pre, merged into /__w/_temp).
// The step's output goes to out; exitCode is the script's (the real hook only
// learns "not 0" and exits 1).
func (h *Hook) RunScriptStep(ctx context.Context, st State, j Job, script string, out io.Writer) (exitCode int, err error) {
	if err := h.CheckPermissions(ctx); err != nil {
		return 0, err
	}
	temp := filepath.Join(h.cfg.WorkDir, "_temp")
	for _, d := range []string{temp, filepath.Join(temp, "_runner_file_commands"), filepath.Join(temp, "_github_home"), filepath.Join(temp, "_github_workflow")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	// The runner's own step file, then the hook's entry point script around it
	// (writeEntryPointScript / writeRunScript).
	step := randomHex() + ".sh"
	if err := os.WriteFile(filepath.Join(temp, step), []byte(script), 0o644); err != nil {
		return 0, err
	}
	entry := randomHex() + ".sh"
	content := fmt.Sprintf("#!/bin/sh -l\n\ncd %s && exec  sh -e /__w/_temp/%s\n", j.containerWorkspace(), step)
	if err := os.WriteFile(filepath.Join(temp, entry), []byte(content), 0o644); err != nil {
		return 0, err
	}
	defer os.Remove(filepath.Join(temp, entry))
	defer os.Remove(filepath.Join(temp, step))
	if h.cfg.Mode == NoVolume {
		if _, err := h.execOK(ctx, st.JobPod, []string{"sh", "-c", "mkdir -p /__w && mkdir -p /__w/_temp && mkdir -p /__w/_temp_pre"}); err != nil {
			return 0, err
		}
		if err := h.copyToPod(ctx, st.JobPod, temp, "/__w/_temp_pre"); err != nil {
			return 0, err
		}
		if _, err := h.execOK(ctx, st.JobPod, []string{"sh", "-c", mergeTemp}); err != nil {
			return 0, fmt.Errorf("failed to merge temp dirs: %w", err)
		}
	}
	code, err := h.exec(ctx, st.JobPod, []string{"sh", "-e", "/__w/_temp/" + entry}, nil, out)
	if err != nil {
		return 0, fmt.Errorf("failed to run script step: %w", err)
	}
	return code, nil
}

// mergeTemp is run-script-step.ts's mergeCommands (H@0.8.1).
const mergeTemp = `set -e && mkdir -p /__w/_temp /__w/_temp_pre && SRC=/__w/_temp_pre && DST=/__w/_temp && ` +
	`cp -a "$SRC/_runner_file_commands/." "$DST/_runner_file_commands" && ` +
	`find "$SRC" -type f ! -path "*/_runner_file_commands/*" -exec sh -c '
    rel="${1#$2/}"
    target="$3/$rel"
    mkdir -p "$(dirname "$target")"
    cp -a "$1" "$target"
  ' _ {} "$SRC" "$DST" \; && rm -rf /__w/_temp_pre`

// CleanupJob is cleanup_job (`packages/k8s/src/hooks/cleanup-job.ts`): every
// pod and secret labelled runner-pod=<R> in the namespace deleted (pods with
// grace 0). Step Jobs (v0.7.0) are not deleted, as in the hook.
func (h *Hook) CleanupJob(ctx context.Context) error {
	if err := h.CheckPermissions(ctx); err != nil {
		return err
	}
	return errors.Join(h.prunePods(ctx), h.pruneSecrets(ctx))
}

func (h *Hook) selector() string { return RunnerPodLabel + "=" + h.cfg.RunnerPod }

// prunePods deletes the runner's pods, grace 0.
func (h *Hook) prunePods(ctx context.Context) error {
	pods := h.kube.CoreV1().Pods(h.cfg.Namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: h.selector()})
	if err != nil {
		return err
	}
	var errs []error
	zero := int64(0)
	for _, p := range list.Items {
		if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pruneSecrets deletes the runner's secrets.
func (h *Hook) pruneSecrets(ctx context.Context) error {
	secrets := h.kube.CoreV1().Secrets(h.cfg.Namespace)
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: h.selector()})
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range list.Items {
		if err := secrets.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (h *Hook) warn(msg string) { fmt.Fprintf(h.log, "Warning: %s\n", msg) }

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func basicAuth(user, password string) string {
	return encodeBase64(user + ":" + password)
}

// copyDir copies the tree at src into dst (io.cp recursive, force).
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, raw, info.Mode().Perm())
	})
}

// PolicyRules is the gate as RBAC rules: the least a Role of the hook's
// service account in its namespace can grant (facts sheet §1).
func PolicyRules(m Mode) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, p := range RequiredPermissions(m) {
		res := p.Resource
		if p.Subresource != "" {
			res += "/" + p.Subresource
		}
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: []string{res}, Verbs: p.Verbs})
	}
	return rules
}
