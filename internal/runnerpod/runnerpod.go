// Package runnerpod builds what one runner of a pool is on Kubernetes: a
// StatefulSet with replicas 1 (as ARC's RunnerSet, one per runner) whose pod runs
// the runner container, and a Secret holding the runner's credentials — a
// just-in-time config for ephemeral pools, a registration token otherwise — that
// the StatefulSet owns, so that deleting the runner garbage-collects it. The
// Secret is written first: it is the record that this deployment created the
// runner (see Secret).
//
// Docker (dockerEnabled). dockerd (DockerImage) runs beside the runner as a
// native sidecar: the last init container, with restartPolicy Always. The
// kubelet starts it before the runner container and, when the pod is deleted,
// stops it only after the runner container has exited, so a job that the
// graceful stop lets finish (runner/entrypoint.sh, "Stopping") keeps its docker
// daemon to its end, and a job cancelled then can still remove its containers.
// As a plain container it got SIGTERM together with the runner and took the
// job's containers down at once. The sidecar gets what remains of the pod's
// grace period (at least 2 s, the kubelet's minimum): all of StopSeconds stays
// the runner's, and a dockerd killed once the runner has reported its job loses
// nothing of the job.
//
// The sidecar has no startup probe, on purpose: the runner container starts as
// soon as the sidecar's process runs, and its entrypoint waits for `docker info`
// to answer (DOCKER_WAIT_TIMEOUT, 120 s by default). A daemon that never answers
// then fails the runner container with a termination message that names docker
// ("runner not started: docker did not become ready …"), which the sweeper's
// stuck reason and `runnerscaler status` show; with a probe the pod would stay
// in its init phase, with the reason on a container that the stuck reason does
// not read.
//
// A template that has its own container or init container named `docker` keeps
// it exactly as written, where it is, and gets none of the above (no sidecar,
// no DOCKER_HOST, no work volume): the pool runs its own docker. A plain
// container of that name still stops with the runner; the docs say to declare
// it as a native sidecar.
package runnerpod

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
)

// Labels and annotations. The graceful-stop keys are ARC's, so an ARC user
// recognises them.
const (
	LabelPool         = "runnerscaler.dev/pool"
	LabelRunner       = "runnerscaler.dev/runner"
	LabelTemplateHash = "runnerscaler.dev/template-hash"

	AnnotationSyncTime = "runnerscaler.dev/sync-time"
	// AnnotationJobCompleted (ephemeral runners' StatefulSets): when the
	// sweeper found the runner's job completed, by the job↔runner link,
	// while its container still ran (package reconcile, finishing.go).
	AnnotationJobCompleted = "runnerscaler.dev/job-completed-at"
	// AnnotationTokenExpiresAt (token runners): when the registration token in
	// the runner's Secret expires; the sweeper refreshes it until the runner
	// registers, then removes the token and this annotation (its absence: the
	// Secret holds no token).
	AnnotationTokenExpiresAt            = "runnerscaler.dev/token-expires-at"
	AnnotationRunnerID                  = "actions-runner/id"
	AnnotationUnregistrationRequest     = "actions-runner/unregistration-request-timestamp"
	AnnotationUnregistrationStart       = "actions-runner/unregistration-start-timestamp"
	AnnotationUnregistrationComplete    = "actions-runner/unregistration-complete-timestamp"
	AnnotationRunnerCompletionWaitStart = "actions-runner/runner-completion-wait-start-timestamp"

	// AnnotationJITRunnerID, on a runner's pod (from its template), is the runner
	// id its JIT config registered: a pod whose StatefulSet is gone still knows
	// which GitHub runner to remove. (AnnotationRunnerID on a pod means
	// "registered": GitHub listed it.)
	AnnotationJITRunnerID = "runnerscaler.dev/jit-runner-id"

	// AnnotationLabelsRemoved, on a runner's pod being stopped: when the sweeper
	// removed the runner's custom labels on GitHub, so that GitHub hands it no
	// job of its pool while its listener stops (package reconcile, withdraw.go).
	AnnotationLabelsRemoved = "runnerscaler.dev/labels-removed"

	// Finalizer holds a runner pod until its runner is unregistered.
	Finalizer = "runnerscaler.dev/unregister"

	// ContainerName is the runner container's name in every pool's template.
	ContainerName = "runner"

	// Secret keys.
	SecretJITConfig = "jitconfig"
	SecretToken     = "token"
)

// Template decodes the pool's pod template strictly (an unknown field is an error
// with its path, e.g. `spec.containers[0].imagee`), refuses what only the
// runnerscaler may set (see ownedByUs), applies the image shorthand and the docker
// options, checks that it has a `runner` container, and sets the graceful stop's
// timing (see stopTiming) and the credentials' protection (see protectCredentials).
func Template(p *pool.Pool) (corev1.PodTemplateSpec, error) {
	var tmpl corev1.PodTemplateSpec
	if p.Kubernetes.Template.Kind != 0 {
		if err := decodeStrict(&p.Kubernetes.Template, &tmpl); err != nil {
			return tmpl, fmt.Errorf("pool %s: kubernetes.template: %w", p.Name, err)
		}
		if err := ownedByUs(tmpl); err != nil {
			return tmpl, fmt.Errorf("pool %s: kubernetes.template: %w", p.Name, err)
		}
	}
	k := p.Kubernetes
	i := runnerIndex(tmpl.Spec.Containers)
	if i < 0 {
		if k.Image == "" {
			return tmpl, fmt.Errorf("pool %s: kubernetes.template: no container named %q (or set kubernetes.image)", p.Name, ContainerName)
		}
		tmpl.Spec.Containers = append([]corev1.Container{{Name: ContainerName}}, tmpl.Spec.Containers...)
		i = 0
	}
	if k.Image != "" {
		tmpl.Spec.Containers[i].Image = k.Image
	}
	if tmpl.Spec.Containers[i].Image == "" {
		return tmpl, fmt.Errorf("pool %s: kubernetes.template: the %q container has no image", p.Name, ContainerName)
	}
	if k.ServiceAccountName != "" {
		tmpl.Spec.ServiceAccountName = k.ServiceAccountName
	}
	if tmpl.Spec.RestartPolicy == "" {
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways // the only policy a StatefulSet accepts
	}
	if err := addDocker(p, &tmpl); err != nil {
		return tmpl, fmt.Errorf("pool %s: kubernetes.template: %w", p.Name, err)
	}
	if err := addContainerMode(p, &tmpl); err != nil {
		return tmpl, err
	}
	if err := stopTiming(&tmpl.Spec); err != nil {
		return tmpl, fmt.Errorf("pool %s: kubernetes.template: %w", p.Name, err)
	}
	protectCredentials(&tmpl.Spec, p.Kubernetes.InContainerMode())
	return tmpl, nil
}

// protectCredentials keeps the runner's credentials from its jobs by default (see
// runner/README.md):
//   - the runner container starts as root (runAsUser 0): the entrypoint and tini
//     keep root, whose environment — with the registration token or JIT config
//     that the container gets from the runner's Secret — a job step, run as the
//     runner user, cannot read. A template that chooses a user (runAsUser, or
//     runAsNonRoot, in the pod's or the container's securityContext) keeps it; the
//     entrypoint then warns that the credentials are not protected. In container
//     mode runAsUser is left to the image (runner/Dockerfile's starts as root):
//     when every container of a pod sets one runAsUser, the kubelet writes the
//     service account token readable by that user only (0600), and the hooks,
//     which run as the runner user, could not read it;
//   - no process of the runner container gains privileges through a setuid
//     binary or file capabilities (allowPrivilegeEscalation false: a sudo rule
//     would otherwise make a job root, who reads the credentials), unless the
//     template sets the field, or the container is privileged or adds
//     CAP_SYS_ADMIN, which the API server refuses together with it (dockerd in
//     the runner container); the entrypoint's own drop to the runner user needs
//     no escalation;
//   - no service account token is mounted (automountServiceAccountToken false), so
//     a job gets no Kubernetes credentials, unless the template says otherwise or
//     names a service account (kubernetes.serviceAccountName included): a pool
//     that names one wants its runners to use it.
func protectCredentials(spec *corev1.PodSpec, containerMode bool) {
	c := &spec.Containers[runnerIndex(spec.Containers)]
	if !containerMode && !choosesUser(spec.SecurityContext, c.SecurityContext) {
		if c.SecurityContext == nil {
			c.SecurityContext = &corev1.SecurityContext{}
		}
		c.SecurityContext.RunAsUser = ptr.To[int64](0)
	}
	if mayForbidEscalation(c.SecurityContext) {
		if c.SecurityContext == nil {
			c.SecurityContext = &corev1.SecurityContext{}
		}
		c.SecurityContext.AllowPrivilegeEscalation = ptr.To(false)
	}
	if spec.AutomountServiceAccountToken == nil && spec.ServiceAccountName == "" {
		spec.AutomountServiceAccountToken = ptr.To(false)
	}
}

// mayForbidEscalation: the template leaves allowPrivilegeEscalation unset, and
// the API server accepts it false with the rest of the security context.
func mayForbidEscalation(sc *corev1.SecurityContext) bool {
	if sc == nil {
		return true
	}
	if sc.AllowPrivilegeEscalation != nil || ptr.Deref(sc.Privileged, false) {
		return false
	}
	return sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Add, "CAP_SYS_ADMIN")
}

// choosesUser: the template says which user the runner container runs as, or
// that it must not be root.
func choosesUser(pod *corev1.PodSecurityContext, c *corev1.SecurityContext) bool {
	if pod != nil && (pod.RunAsUser != nil || pod.RunAsNonRoot != nil && *pod.RunAsNonRoot) {
		return true
	}
	return c != nil && (c.RunAsUser != nil || c.RunAsNonRoot != nil && *c.RunAsNonRoot)
}

// decodeStrict turns the raw YAML template into a PodTemplateSpec with the API
// machinery's strict decoder, which names unknown and duplicate fields by path.
func decodeStrict(node *yaml.Node, out *corev1.PodTemplateSpec) error {
	raw, err := nodeJSON(node)
	if err != nil {
		return err
	}
	wrapped, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "PodTemplate", "template": json.RawMessage(raw)})
	if err != nil {
		return err
	}
	s := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{Strict: true})
	var pt corev1.PodTemplate
	if _, _, err := s.Decode(wrapped, nil, &pt); err != nil {
		return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), `"template.`, `"`))
	}
	*out = pt.Template
	return nil
}

func runnerIndex(cs []corev1.Container) int {
	for i, c := range cs {
		if c.Name == ContainerName {
			return i
		}
	}
	return -1
}

// DockerImage is the docker sidecar's image when dockerEnabled is set.
const DockerImage = "docker:27-dind"

// DockerContainer is the docker sidecar's name. A template with a container or
// an init container of that name keeps it as written and gets no sidecar.
const DockerContainer = "docker"

// DockerHost is where the runner reaches the sidecar's dockerd (DOCKER_HOST):
// TCP without TLS (DOCKER_TLS_CERTDIR empty), on the pod's loopback.
const DockerHost = "tcp://localhost:2375"

// dockerWorkDir is the runner's work directory in runner/Dockerfile's image,
// shared with the sidecar at the same path, so that the paths a job gives
// docker (bind mounts) exist where dockerd looks.
const dockerWorkDir = "/home/runner/_work"

// WorkVolume is the volume dockerEnabled shares between the runner container
// and the docker sidecar at dockerWorkDir. A template's own volume or volume
// claim template of that name is that volume, as in ARC (a dind pool whose
// work directory is on a disk of its own); without one, an emptyDir is added.
// The runner container mounts it there unless the template mounts it there
// already; a template that mounts another volume there is refused, since the
// sidecar would see other files than the runner. docs/design/dind-work-volume.md
// says why this is reused rather than refused.
const WorkVolume = "work"

func addDocker(p *pool.Pool, tmpl *corev1.PodTemplateSpec) error {
	k := p.Kubernetes
	spec := &tmpl.Spec
	i := runnerIndex(spec.Containers)
	c := &spec.Containers[i]
	switch {
	case k.DockerdWithinRunnerContainer:
		if c.SecurityContext == nil {
			c.SecurityContext = &corev1.SecurityContext{}
		}
		c.SecurityContext.Privileged = ptr.To(true)
		c.Env = append(c.Env, corev1.EnvVar{Name: "DOCKERD_IN_RUNNER", Value: "true"})
	case k.DockerEnabled && !hasContainer(spec, DockerContainer):
		c.Env = append(c.Env, corev1.EnvVar{Name: "DOCKER_ENABLED", Value: "true"},
			corev1.EnvVar{Name: "DOCKER_HOST", Value: DockerHost})
		j := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return path.Clean(m.MountPath) == dockerWorkDir })
		switch {
		case j < 0:
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: WorkVolume, MountPath: dockerWorkDir})
		case c.VolumeMounts[j].Name != WorkVolume:
			return fmt.Errorf("spec.containers[%d].volumeMounts[%d].name: %q: dockerEnabled shares the volume %q at %s "+
				"with the docker sidecar, so the runner container must mount that volume there (or nothing)",
				i, j, c.VolumeMounts[j].Name, WorkVolume, dockerWorkDir)
		}
		spec.InitContainers = append(spec.InitContainers, dockerSidecar())
		named := func(name string) bool { return name == WorkVolume }
		if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return named(v.Name) }) &&
			!slices.ContainsFunc(volumeClaims(p), func(c corev1.PersistentVolumeClaim) bool { return named(c.Name) }) {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: WorkVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}
	}
	return nil
}

// dockerSidecar is dockerd as a native sidecar (see the package doc): after
// the template's own init containers, so that they run before it starts, and
// stopped after the runner container.
func dockerSidecar() corev1.Container {
	return corev1.Container{
		Name: DockerContainer, Image: DockerImage,
		RestartPolicy:   ptr.To(corev1.ContainerRestartPolicyAlways),
		Env:             []corev1.EnvVar{{Name: "DOCKER_TLS_CERTDIR", Value: ""}},
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		VolumeMounts:    []corev1.VolumeMount{{Name: WorkVolume, MountPath: dockerWorkDir}},
	}
}

// hasContainer: the pod has a container or an init container named name.
func hasContainer(spec *corev1.PodSpec, name string) bool {
	named := func(c corev1.Container) bool { return c.Name == name }
	return slices.ContainsFunc(spec.Containers, named) || slices.ContainsFunc(spec.InitContainers, named)
}

// Hash identifies what a runner is built from: the pool's template (after the
// image and docker options), scope, labels, group, mode and volume claims — never
// replicas or times, so a runner is replaced only when what it runs changed.
func Hash(p *pool.Pool, tmpl corev1.PodTemplateSpec) string {
	h := fnv.New64a()
	enc := json.NewEncoder(h)
	_ = enc.Encode(tmpl)
	_ = enc.Encode([]any{p.Scope(), p.AllLabels(), p.Group, p.IsEphemeral(), volumeClaims(p)})
	return strconv.FormatUint(h.Sum64(), 36)
}

func volumeClaims(p *pool.Pool) []corev1.PersistentVolumeClaim {
	pvcs, _ := decodeClaims(p) // checked by Validate when the sweeper starts
	return pvcs
}

func decodeClaims(p *pool.Pool) ([]corev1.PersistentVolumeClaim, error) {
	if p.Kubernetes.VolumeClaimTemplates.Kind == 0 {
		return nil, nil
	}
	raw, err := nodeJSON(&p.Kubernetes.VolumeClaimTemplates)
	if err != nil {
		return nil, err
	}
	var pvcs []corev1.PersistentVolumeClaim
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pvcs); err != nil {
		return nil, fmt.Errorf("pool %s: kubernetes.volumeClaimTemplates: %w", p.Name, err)
	}
	return pvcs, nil
}

// nodeJSON converts raw YAML to JSON, the form the Kubernetes types decode from.
func nodeJSON(node *yaml.Node) ([]byte, error) {
	var v any
	if err := node.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// NewName returns a fresh runner name for the pool: `<pool>-xxxxx`, the name of
// its StatefulSet and Secret (package runnername).
func NewName(pool string) string { return runnername.New(pool) }

// PodName is the name of the runner's only pod, and of its GitHub runner
// (package runnername).
func PodName(name string) string { return runnername.Pod(name) }

// Credentials are what the runner registers with: a JIT config, or a registration token.
type Credentials struct {
	RunnerID  int64 // known at creation with a JIT config
	JITConfig string
	Token     string
	// TokenExpiresAt is when Token expires.
	TokenExpiresAt time.Time
}

// Spec is everything Build needs.
type Spec struct {
	Pool      *pool.Pool
	Template  corev1.PodTemplateSpec
	Hash      string
	Name      string
	GitHubURL string // where runners register: https://github.com or the GHES host
	// Deployment names the deployment that makes the runner (recorded on it).
	Deployment string
	Creds      Credentials
	Now        time.Time
}

// Secret returns the runner's Secret. Created before anything else of the runner
// (empty when Creds are not known yet), it is the record that this deployment owns
// the runner's name, on Kubernetes and on GitHub; AnnotationSyncTime says when it
// was written, by the sweeper's clock. Its StatefulSet owns it once that exists
// (see Own).
func Secret(s Spec) *corev1.Secret {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Pool.Kubernetes.Namespace,
			Labels:      map[string]string{LabelPool: s.Pool.Name, LabelRunner: s.Name},
			Annotations: merge(record(s.Pool, s.Deployment), map[string]string{AnnotationSyncTime: s.Now.UTC().Format(time.RFC3339)})},
		Type: corev1.SecretTypeOpaque,
	}
	SetCredentials(sec, s.Creds)
	return sec
}

// SetCredentials puts the runner's credentials in its Secret, and the runner id
// when the JIT config gave it. Zero credentials change nothing.
func SetCredentials(sec *corev1.Secret, c Credentials) {
	switch {
	case c.JITConfig != "":
		sec.Data = map[string][]byte{SecretJITConfig: []byte(c.JITConfig)}
	case c.Token != "":
		sec.Data = map[string][]byte{SecretToken: []byte(c.Token)}
	}
	if c.RunnerID != 0 {
		if sec.Annotations == nil {
			sec.Annotations = map[string]string{}
		}
		sec.Annotations[AnnotationRunnerID] = strconv.FormatInt(c.RunnerID, 10)
	}
}

// Own makes sts the controller owner of the Secret, so it is garbage-collected with it.
func Own(sec *corev1.Secret, sts *appsv1.StatefulSet) {
	sec.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}
}

// StatefulSet returns the runner's StatefulSet: replicas 1, annotated with the
// runner id when the JIT config gave it, its pod labelled and held by the
// unregistration finalizer, the runner container given its environment and credentials.
func StatefulSet(s Spec) *appsv1.StatefulSet {
	p := s.Pool
	labels := map[string]string{LabelPool: p.Name, LabelRunner: s.Name, LabelTemplateHash: s.Hash}
	tmpl := *s.Template.DeepCopy()
	tmpl.Labels = merge(tmpl.Labels, labels)
	tmpl.Finalizers = append(tmpl.Finalizers, Finalizer)
	tmpl.Annotations = merge(tmpl.Annotations, record(p, s.Deployment)) // not in the template hash: runners made before stay current
	if s.Creds.RunnerID != 0 {
		tmpl.Annotations = merge(tmpl.Annotations, map[string]string{AnnotationJITRunnerID: strconv.FormatInt(s.Creds.RunnerID, 10)})
	}
	i := runnerIndex(tmpl.Spec.Containers)
	tmpl.Spec.Containers[i].Env = append(runnerEnv(s), tmpl.Spec.Containers[i].Env...)
	addState(&tmpl.Spec, i)
	if s.Creds.JITConfig == "" {
		addTokenFile(&tmpl.Spec, i, s.Name)
	}
	tmpl.Spec.Containers[i].ReadinessProbe = JobProbe()
	annotations := merge(record(p, s.Deployment), map[string]string{AnnotationSyncTime: s.Now.UTC().Format(time.RFC3339)})
	if s.Creds.RunnerID != 0 {
		// Known at creation from the JIT config. The pod gets the same annotation
		// only once GitHub lists the runner online: that marks it registered.
		annotations[AnnotationRunnerID] = strconv.FormatInt(s.Creds.RunnerID, 10)
	}
	if !s.Creds.TokenExpiresAt.IsZero() {
		annotations[AnnotationTokenExpiresAt] = s.Creds.TokenExpiresAt.UTC().Format(time.RFC3339)
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: p.Kubernetes.Namespace, Labels: labels, Annotations: annotations,
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr.To[int32](1),
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{LabelPool: p.Name, LabelRunner: s.Name}},
			Template:             tmpl,
			VolumeClaimTemplates: volumeClaims(p),
			PodManagementPolicy:  appsv1.ParallelPodManagement,
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
			},
		},
	}
}

// State volume: an emptyDir that outlives container restarts (not the pod). The
// entrypoint keeps there the marker of an ephemeral runner that already ran — so a
// restarted container never runs a second time with spent credentials — and a
// persistent runner's registration, so a restart resumes it instead of
// registering again (runner/entrypoint.sh). JobDir is where the job hooks keep
// their marker, which the readiness probe and the graceful stop read (the
// entrypoint's default, set explicitly so that no envFrom changes it).
const (
	StateVolume = "runner-state"
	StateDir    = "/runner-state"
	JobDir      = "/run/runner-job"
)

// JobProbeCommand is the runner image's report of whether a job runs: it exits 0
// exactly while one does (the job-started hook ran and the job-completed hook has
// not since, or a Runner.Worker process exists; runner/README.md).
const JobProbeCommand = "/usr/local/bin/runner-job-running"

// JobProbe is the runner container's readiness probe: the container is ready
// exactly while its runner runs a job, so the sweeper reads the pod's own report
// of a job from the pod status it already lists — no exec, and no Kubernetes
// credential in the pod. It looks every second; a report lags a job's start or
// end by about that much.
func JobProbe() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{JobProbeCommand}}},
		PeriodSeconds:    1,
		TimeoutSeconds:   1,
		SuccessThreshold: 1,
		FailureThreshold: 1,
	}
}

func addState(spec *corev1.PodSpec, runner int) {
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: StateVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	c := &spec.Containers[runner]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: StateVolume, MountPath: StateDir})
	c.Env = append(c.Env, corev1.EnvVar{Name: "RUNNER_STATE_DIR", Value: StateDir}, corev1.EnvVar{Name: "RUNNER_JOB_DIR", Value: JobDir})
}

func runnerEnv(s Spec) []corev1.EnvVar {
	p := s.Pool
	sc := p.Scope()
	env := []corev1.EnvVar{
		{Name: "RUNNER_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "GITHUB_URL", Value: s.GitHubURL},
		{Name: "RUNNER_LABELS", Value: strings.Join(p.Labels, ",")},
		{Name: "RUNNER_GROUP", Value: p.Group},
		{Name: "RUNNER_EPHEMERAL", Value: strconv.FormatBool(p.IsEphemeral())},
	}
	switch {
	case sc.Enterprise != "":
		env = append(env, corev1.EnvVar{Name: "RUNNER_ENTERPRISE", Value: sc.Enterprise})
	case sc.Organization != "":
		env = append(env, corev1.EnvVar{Name: "RUNNER_ORG", Value: sc.Organization})
	default:
		env = append(env, corev1.EnvVar{Name: "RUNNER_REPO", Value: sc.Repository})
	}
	if s.Creds.JITConfig == "" {
		return env // the registration token comes as a file (addTokenFile)
	}
	return append(env, corev1.EnvVar{Name: "ACTIONS_RUNNER_INPUT_JITCONFIG", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: s.Name}, Key: SecretJITConfig}}})
}

func merge(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// Validate checks every pool's template and volume claim templates (see
// ValidatePool); the sweeper calls it at start so a bad pools file fails before
// any sweep. The error joins one per pool that fails.
func Validate(cfg *pool.Config) error {
	var errs []error
	for i := range cfg.Pools {
		errs = append(errs, ValidatePool(&cfg.Pools[i]))
	}
	return errors.Join(errs...)
}

// ValidatePool checks the pool's template and volume claim templates, including
// what the API server would refuse in the StatefulSet the sweeper builds from
// them (see admissible and finalPod). Each error begins with `pool NAME: ` and
// the field, e.g. `kubernetes.template: `; the error joins one per problem of
// the final pod.
func ValidatePool(p *pool.Pool) error {
	tmpl, err := Template(p)
	if err != nil {
		return err
	}
	claims, err := decodeClaims(p)
	if err != nil {
		return err
	}
	if err := ownedClaims(claims); err != nil {
		return fmt.Errorf("pool %s: %w", p.Name, err)
	}
	if errs := admissible(finalPod(p, tmpl)); len(errs) > 0 {
		wrapped := make([]error, len(errs))
		for i, err := range errs {
			wrapped[i] = fmt.Errorf("pool %s: kubernetes.template: %w", p.Name, err)
		}
		return errors.Join(wrapped...)
	}
	if tmpl.Spec.Containers[runnerIndex(tmpl.Spec.Containers)].ReadinessProbe != nil {
		return fmt.Errorf("pool %s: kubernetes.template: the %s container's readinessProbe is the runnerscaler's "+
			"report of a running job and cannot be set", p.Name, ContainerName)
	}
	if err := tokenReadable(p, tmpl.Spec); err != nil {
		return fmt.Errorf("pool %s: %w", p.Name, err)
	}
	return nil
}

// FinalPod is the pod of a runner of the pool as the sweeper creates it (see
// finalPod), for the checks that need the whole pod, such as Pod Security's.
func FinalPod(p *pool.Pool) (corev1.PodTemplateSpec, error) {
	tmpl, err := Template(p)
	if err != nil {
		return tmpl, err
	}
	pod, _ := finalPod(p, tmpl)
	return pod, nil
}

// finalPod is the pod template and volume claim templates of the StatefulSet
// the sweeper builds for a runner of the pool, with everything it adds to the
// pool's template (the docker sidecar and work volume, the state volume, the
// registration token's file for a pool that uses one), so that the checks see
// what the API server will. The runner's name and credentials are stand-ins:
// they change values, not which fields there are.
func finalPod(p *pool.Pool, tmpl corev1.PodTemplateSpec) (corev1.PodTemplateSpec, []corev1.PersistentVolumeClaim) {
	creds := Credentials{RunnerID: 1, JITConfig: "stand-in"}
	if p.UsesToken() {
		creds = Credentials{Token: "stand-in"}
	}
	sts := StatefulSet(Spec{Pool: p, Template: tmpl, Hash: Hash(p, tmpl), Name: NewName(p.Name), Creds: creds})
	return sts.Spec.Template, sts.Spec.VolumeClaimTemplates
}
