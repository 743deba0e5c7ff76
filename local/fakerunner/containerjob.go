package fakerunner

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/runnerscaler/runnerscaler/local/fakehook"
)

// The runner's message for a job without a container on a runner that
// requires one (actions/runner src/Runner.Worker/JobExtension.cs, with
// ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER=true).
const jobContainerRequired = "Jobs without a job container are forbidden on this runner, please add a 'container:' to your job or contact your self-hosted runner administrator."

// serviceAccountDir is where a pod's service account token, CA and namespace are mounted.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// containerJob is a job that runs through the runner's container hook: the
// runner with ACTIONS_RUNNER_CONTAINER_HOOKS set, the job with a container.
type containerJob struct {
	hook *fakehook.Hook
	job  fakehook.Job
	st   fakehook.State
}

// usesHook says how the runner takes j: through its container hook (the hook
// is set and the job has a container), refused (the hook is set, the job has no
// container, and the runner requires one), or on the runner itself.
func usesHook(env Env, j job) (hook bool, refusal string) {
	if env.Getenv(fakehook.EnvHooks) == "" {
		return false, ""
	}
	if j.Container == nil {
		if env.Getenv(fakehook.EnvRequireJobCtr) == "true" {
			return false, jobContainerRequired
		}
		return false, ""
	}
	return true, ""
}

// newContainerJob reads the hook's configuration as the hook would (its
// environment, the in-cluster service account) for the runner in root.
func newContainerJob(env Env, root string, j job, log io.Writer) (*containerJob, error) {
	ns, _ := os.ReadFile(serviceAccountDir + "/namespace")
	cfg, err := fakehook.ConfigFromEnv(env.Getenv, strings.TrimSpace(string(ns)), root)
	if err != nil {
		return nil, err
	}
	restCfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the in-cluster configuration: %w", err)
	}
	h, err := fakehook.New(cfg, restCfg, log, nil)
	if err != nil {
		return nil, err
	}
	fj := fakehook.Job{Repository: j.Repository, Container: fakehook.Container{Image: j.Container.Image,
		Username: j.Container.Username, Password: j.Container.Password}}
	for _, s := range j.Services {
		fj.Services = append(fj.Services, fakehook.Container{Image: s.Image, Username: s.Username, Password: s.Password})
	}
	return &containerJob{hook: h, job: fj}, nil
}

// prepare is "Initialize containers": the runner creates the job's workspace
// (_work/<repo>/<repo>) and calls prepare_job.
func (c *containerJob) prepare(ctx context.Context, root string) error {
	name := c.job.Repository[strings.LastIndex(c.job.Repository, "/")+1:]
	if err := os.MkdirAll(root+"/_work/"+name+"/"+name, 0o755); err != nil {
		return err
	}
	st, err := c.hook.PrepareJob(ctx, c.job)
	c.st = st
	return err
}

// run runs the job's script as a run: step in the job container.
func (c *containerJob) run(ctx context.Context, script string, out io.Writer) (int, error) {
	return c.hook.RunScriptStep(ctx, c.st, c.job, script, out)
}

// cleanup is the post-job step "Stop containers" (condition always()), which
// the runner registers before prepare_job: cleanup_job, whatever the job's end.
func (c *containerJob) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.hook.CleanupJob(ctx)
}
