// Package runnerversion knows which actions/runner versions GitHub still gives
// jobs to, and warns before a pool's version stops getting them.
//
// GitHub refuses to register a runner older than MinimumToRegister, and stops
// giving jobs to a runner that has not installed a release within Grace of its
// publication: a pool pinned to a version is refused Grace after the next
// release is published. The runner then starts, says "Runner version v… is
// deprecated and cannot receive messages" and exits, and the pool's jobs wait.
//
// A pool states the version its image runs (pool.Pool.RunnerVersion, default
// Pinned: what runner/Dockerfile installs). Once a day per deployment, the
// sweeper asks GitHub for the latest release (one conditional call, its answer
// kept in the table so that restarts do not repeat it), keeps the releases it
// has seen, and writes each pool's days left as a metric (RunnerVersionDaysLeft);
// `runnerscaler status` shows the same assessment.
package runnerversion
