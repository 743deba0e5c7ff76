package fakehook

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
)

// Mode is the hooks' release a runner runs, chosen by the path its
// ACTIONS_RUNNER_CONTAINER_HOOKS names.
type Mode int

// The two releases ARC's container modes run (facts sheet §9; actions/runner
// images/Dockerfile unzips them into /home/runner/k8s and /home/runner/k8s-novolume).
const (
	// Kubernetes is hooks v0.7.0, ARC's containerMode `kubernetes`: the
	// workflow pod mounts the runner's work claim and is pinned to its node.
	Kubernetes Mode = iota + 1
	// NoVolume is hooks v0.8.1, ARC's `kubernetes-novolume`: emptyDirs, an
	// fs-init init container, and the workspace copied in through exec.
	NoVolume
)

func (m Mode) String() string {
	switch m {
	case Kubernetes:
		return "kubernetes (hooks v0.7.0)"
	case NoVolume:
		return "kubernetes-novolume (hooks v0.8.1)"
	}
	return "unknown"
}

// ModeOf is the release a hook path runs: …/k8s/index.js is v0.7.0,
// …/k8s-novolume/index.js v0.8.1 (where actions/runner's image puts them).
func ModeOf(hookPath string) (Mode, error) {
	if path.Base(hookPath) == "index.js" {
		switch path.Base(path.Dir(hookPath)) {
		case "k8s":
			return Kubernetes, nil
		case "k8s-novolume":
			return NoVolume, nil
		}
	}
	return 0, fmt.Errorf("ACTIONS_RUNNER_CONTAINER_HOOKS=%q: the simulated hook knows only …/k8s/index.js (v0.7.0) and …/k8s-novolume/index.js (v0.8.1)", hookPath)
}

// The hook's environment (facts sheet §3; H `k8s/hooks/constants.ts`, `k8s/k8s/index.ts`, `k8s/k8s/utils.ts`).
const (
	EnvHooks           = "ACTIONS_RUNNER_CONTAINER_HOOKS"
	EnvPodName         = "ACTIONS_RUNNER_POD_NAME"
	EnvNamespace       = "ACTIONS_RUNNER_KUBERNETES_NAMESPACE"
	EnvClaimName       = "ACTIONS_RUNNER_CLAIM_NAME"
	EnvUseKubeSched    = "ACTIONS_RUNNER_USE_KUBE_SCHEDULER"
	EnvPrepareTimeout  = "ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS"
	EnvTemplate        = "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE"
	EnvRunnerImage     = "ACTIONS_RUNNER_IMAGE"
	EnvRequireJobCtr   = "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER"
	defaultRunnerImage = "ghcr.io/actions/actions-runner:latest"
	defaultPrepareWait = 600 * time.Second
)

// Config is what the hook reads from its environment, plus where the runner's
// work directory is.
type Config struct {
	Mode Mode
	// RunnerPod is ACTIONS_RUNNER_POD_NAME (required): the names and the
	// runner-pod label of everything the hook creates.
	RunnerPod string
	// Namespace is where the hook works: ACTIONS_RUNNER_KUBERNETES_NAMESPACE,
	// else the in-cluster namespace (the runner pod's).
	Namespace string
	// ClaimName is the work claim (kubernetes mode): ACTIONS_RUNNER_CLAIM_NAME, else <RunnerPod>-work.
	ClaimName string
	// UseKubeScheduler (kubernetes mode, exactly "true"): a hostname node
	// affinity instead of spec.nodeName.
	UseKubeScheduler bool
	// RunnerImage is fs-init's image (novolume): ACTIONS_RUNNER_IMAGE, else ghcr.io/actions/actions-runner:latest.
	RunnerImage string
	// TemplatePath is ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE ("": none).
	TemplatePath string
	// PrepareTimeout bounds the wait for the workflow pod (default 600 s).
	PrepareTimeout time.Duration
	// WorkDir is the runner's _work directory (dirname of RUNNER_WORKSPACE):
	// the claim's root in kubernetes mode, what is copied into /__w in novolume.
	WorkDir string
	// Externals is the runner's externals directory (RUNNER_WORKSPACE/../../externals),
	// copied into WorkDir/externals by v0.7.0's prepare_job.
	Externals string
}

// ConfigFromEnv reads the hook's variables as the hook does; inClusterNamespace
// is the namespace of the pod's service account ("" outside a pod).
func ConfigFromEnv(getenv func(string) string, inClusterNamespace, runnerRoot string) (Config, error) {
	mode, err := ModeOf(getenv(EnvHooks))
	if err != nil {
		return Config{}, err
	}
	c := Config{Mode: mode, RunnerPod: getenv(EnvPodName), Namespace: getenv(EnvNamespace), ClaimName: getenv(EnvClaimName),
		UseKubeScheduler: getenv(EnvUseKubeSched) == "true", RunnerImage: getenv(EnvRunnerImage),
		TemplatePath: getenv(EnvTemplate), PrepareTimeout: defaultPrepareWait,
		WorkDir: path.Join(runnerRoot, "_work"), Externals: path.Join(runnerRoot, "externals")}
	if c.Namespace == "" {
		c.Namespace = inClusterNamespace
	}
	if c.ClaimName == "" && c.RunnerPod != "" {
		c.ClaimName = c.RunnerPod + "-work"
	}
	if c.RunnerImage == "" {
		c.RunnerImage = defaultRunnerImage
	}
	// getPrepareJobTimeoutSeconds: a value that is not an integer > 0 falls back to 600 (with a warning).
	if s := getenv(EnvPrepareTimeout); s != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n > 0 {
			c.PrepareTimeout = time.Duration(n) * time.Second
		}
	}
	return c, c.Validate()
}

// ErrNoPodName is the hook's error without ACTIONS_RUNNER_POD_NAME (constants.ts getRunnerPodName).
var ErrNoPodName = errors.New("'ACTIONS_RUNNER_POD_NAME' env is required, please contact your self hosted runner administrator")

// Validate fails on what the hook would throw on.
func (c Config) Validate() error {
	switch {
	case c.Mode != Kubernetes && c.Mode != NoVolume:
		return fmt.Errorf("fakehook: Mode %d is neither Kubernetes nor NoVolume", c.Mode)
	case c.RunnerPod == "":
		return ErrNoPodName
	case c.Namespace == "":
		// namespace() in k8s/k8s/index.ts
		return errors.New(`Failed to determine namespace, falling back to ` + "`default`" + `. Namespace should be set in context, or in env variable "ACTIONS_RUNNER_KUBERNETES_NAMESPACE"`)
	case c.WorkDir == "":
		return errors.New("fakehook: WorkDir (the runner's _work) is required")
	case c.PrepareTimeout <= 0:
		return errors.New("fakehook: PrepareTimeout must be positive")
	case c.Mode == Kubernetes && c.ClaimName == "":
		return errors.New("fakehook: ClaimName is required in kubernetes mode")
	}
	return nil
}
