// Package fakehook is the Kubernetes container hook of actions/runner-container-hooks
// (packages/k8s) for the local stack's fake runner (local/fakerunner): what the
// runner and the hook do against the API server for a job with a `container:`
// and `services:`, written from the hooks' source so that a test on the stack
// checks the product against the hooks' behaviour, not against a shape we
// invented. Which release is played follows the runner's
// ACTIONS_RUNNER_CONTAINER_HOOKS, as in actions/runner's image:
// …/k8s/index.js is v0.7.0 (ARC's containerMode `kubernetes`),
// …/k8s-novolume/index.js is v0.8.1 (`kubernetes-novolume`).
//
// Sources (tags of github.com/actions/runner-container-hooks; paths under
// packages/k8s/src/), with the facts sheet the project keeps of them
// (container-hooks.md, §n below):
//
//   - the permission gate (index.ts run(); k8s/index.ts requiredPermissions,
//     isAuthPermissionsOK; §1): before every command, one
//     SelfSubjectAccessReview per gated verb in the hook's namespace, v0.8.1
//     without batch/jobs; any denied fails the command with the hook's
//     message. CheckPermissions; PolicyRules is the gate as a Role's rules.
//   - prepare_job (hooks/prepare-job.ts; k8s/index.ts createPod (v0.7.0),
//     createJobPod (v0.8.1), prunePods, waitForPodPhases, BackOffManager,
//     getCurrentNodeName, createDockerSecret, isPodContainerAlpine,
//     execCpToPod; k8s/utils.ts containerVolumes, CONTAINER_VOLUMES,
//     generateContainerName; hooks/constants.ts; §2, §4, §5, §6): the
//     runner's pods pruned by runner-pod=<R>; the pod <R[0:54]>-workflow with
//     the job container `job` (tail -f /dev/null, env GITHUB_ACTIONS and CI)
//     then one container per service named after its image, restartPolicy
//     Never, the one label runner-pod=<R>; v0.7.0: the runner pod read for its
//     spec.nodeName (pinned, or a hostname affinity with
//     ACTIONS_RUNNER_USE_KUBE_SCHEDULER=true), volume `work` the claim
//     ACTIONS_RUNNER_CLAIM_NAME (default <R>-work) mounted at /__w, /__e,
//     /github/home, /github/workflow, the runner's externals copied into it;
//     v0.8.1: emptyDirs externals, github and work at /__e, /github, /__w in
//     every container, fsGroup 1001, the init container fs-init of
//     ACTIONS_RUNNER_IMAGE; registry credentials as an immutable
//     dockerconfigjson Secret <R[0:47]>-secret-<8> in imagePullSecrets; then
//     `get pod` polled after 1, 2, 4, 8, 16, 20… s until Running, failing at
//     once on a phase other than Pending and after
//     ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS (default 600), pruning the
//     pods on a failure; v0.8.1 copies the runner's _work into /__w (a tar
//     stream into `tar xf -` over exec) and checks the copy; the alpine check.
//   - the template, ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE (k8s/utils.ts
//     readExtensionFromFile, mergeObjectMeta, mergePodSpecWithOptions,
//     mergeContainerWithOptions; §7): labels and annotations added or
//     overwritten (runner-pod included), volumes appended, `$job` merged into
//     the job container and `$<service>` into that service (env, volumeMounts
//     and ports appended, name and image kept, every other field replacing),
//     other containers appended, every other spec key replacing the hook's.
//     The merge works on the pod as a JSON object, as the hook's JavaScript.
//   - run_script_step (hooks/run-script-step.ts): the step's script written to
//     the runner's _temp and an entry-point script around it, run as
//     `sh -e /__w/_temp/<file>` in container job over pods/exec (a WebSocket
//     GET, as @kubernetes/client-node's Exec); v0.8.1 first copies the
//     runner's _temp in (tar into /__w/_temp_pre, its merge script into
//     /__w/_temp). In v0.7.0 the script reaches the pod through the shared
//     claim only.
//   - cleanup_job (hooks/cleanup-job.ts; §6): every pod (grace 0) and secret
//     labelled runner-pod=<R> in the namespace deleted. The runner calls it in
//     a post step registered before prepare_job (local/fakerunner), so only
//     while its process lives: a killed runner leaves its workflow pod behind,
//     as the real one does.
//
// Simplified, because this is a simulator and only what cannot run here is
// replaced (node and the hook's JavaScript cannot run in the local runner
// image): the hook is called in-process rather than as `node index.js` with a
// JSON line on stdin and a response file; the runner hands it only what the
// simulator's jobs carry (an image and credentials per container: no ports,
// env, entry points, options or user volumes, so no hostPorts, no user
// volume prepare script); container steps (run_container_step: v0.7.0's step
// Job, v0.8.1's step pod) are not played, the simulator's jobs having none;
// the step's exit code is reported as it is (the hook learns only that it was
// not 0 and exits 1); the copy back of _runner_file_commands after a v0.8.1
// step is left out (the fake runner reads no file commands); v0.8.1's copy
// check compares regular files with their sizes and fails when they never
// match (the hook lists directories too and carries on regardless; here the
// check is the evidence that the workspace arrived); v0.8.1's shared
// CONTAINER_VOLUMES array, into which a template's volumeMounts for one
// container leak into the others (§5, code reading), is not reproduced.
// The namespace is ACTIONS_RUNNER_KUBERNETES_NAMESPACE or the in-cluster one
// (client-node's loadFromDefault would prefer a kubeconfig; the runner pod has
// none).
package fakehook
