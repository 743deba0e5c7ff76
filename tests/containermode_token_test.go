package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/runnerimage"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestContainerModeHooksReadTheirProjectedToken: a container-mode runner pod
// gets its service account's token as every pod does — the projected volume
// the ServiceAccount admission plugin adds, which the kubelet writes — and
// the hooks, which the runner runs as the runner user, read it: a container
// job succeeds. The token file in the running runner container must be
// readable by the runner user (runnerimage.UID).
//
// It failed before main's d8197ba: runnerpod's protectCredentials gave the
// runner container runAsUser 0, so every container of the pod ran as one
// user, and the kubelet then writes a projected service-account token with
// mode 0600, owned by that user (k8s.io/kubernetes pkg/volume/util
// FsUserFrom, pkg/volume/projected): root's alone. Every container job failed
// in prepare_job with "open …/serviceaccount/token: permission denied".
func TestContainerModeHooksReadTheirProjectedToken(t *testing.T) {
	t.Parallel()
	c := newContainerModeWorld(t, cmSetup{mode: pool.ContainerModeNoVolume, opts: loop.Options{SweepEvery: time.Second}})
	queued := c.queueContainerJob(20*time.Second, "echo in the job container")
	var token string
	c.waitFor("the token file in the running runner container", 3*time.Minute, func() bool {
		j := c.job(queued.ID)
		if j.RunnerName == "" {
			return false
		}
		pod := c.runnerPod(j.RunnerName)
		cs := runnerpod.RunnerStatus(pod)
		if cs == nil || cs.State.Running == nil {
			return false
		}
		_, id, _ := strings.Cut(cs.ContainerID, "://")
		pid, err := processOf(id)
		if err != nil {
			return false
		}
		fi, err := os.Stat(filepath.Join(fmt.Sprintf("/proc/%d/root", pid), testenv.ServiceAccountDir, "token"))
		if err != nil {
			return false
		}
		st := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		readable := mode&0o004 != 0 || st.Uid == runnerimage.UID && mode&0o400 != 0 || st.Gid == runnerimage.GID && mode&0o040 != 0
		token = fmt.Sprintf("%s/token in %s: mode %v, owner %d:%d (runner user %d:%d can read it: %v)", testenv.ServiceAccountDir,
			pod.Name, mode, st.Uid, st.Gid, runnerimage.UID, runnerimage.GID, readable)
		if !readable {
			t.Errorf("%s", token)
		}
		return true
	})
	t.Log(token)
	c.waitFor("the job completed", 3*time.Minute, func() bool { return c.job(queued.ID).State == githubsim.JobCompleted })
	if j := c.job(queued.ID); j.Conclusion != githubsim.JobSuccess {
		t.Fatalf("container job %d ended %s, output:\n%s\nwant success: the hooks read their token", j.ID, j.Conclusion, j.Output)
	}
}
