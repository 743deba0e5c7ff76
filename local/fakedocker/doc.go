// Package fakedocker stands in for docker on the local stack's node, where the
// docker sidecar's image (runnerpod.DockerImage, docker:27-dind) cannot be
// pulled (no registry is reachable) and no docker engine exists: a tiny dockerd
// and docker CLI, so that a pool with dockerEnabled runs there with the
// product's own pod, and a job can "use docker".
//
// The program is dispatched by the name it is run as (argv[0]):
//
//	dockerd  answers the docker API's /_ping, /version and /info on tcp :2375
//	         (docker:dind's address with TLS off, as the sidecar runs it: the
//	         runner's DOCKER_HOST is tcp://localhost:2375); its arguments
//	         (--mtu=..., --registry-mirror=...) are accepted and ignored. On
//	         SIGTERM or SIGINT it exits at once, its listener closed: a real
//	         dockerd stopping takes the job's containers down with it, and a
//	         job step that uses docker afterwards fails as it would.
//	docker   the CLI's `docker info`, `docker version` and `docker ping` against
//	         DOCKER_HOST (tcp://host:port or unix:///path; default the unix socket
//	         /var/run/docker.sock); a daemon that does not answer gives the real
//	         CLI's "Cannot connect to the Docker daemon at …" and exit code 1.
//
// Two images carry it: the local runner image (local/runnerimage) has it as
// /usr/bin/docker, as runner/Dockerfile's has docker-cli, so that the
// entrypoint's wait for docker (DOCKER_ENABLED) and a job's `docker info` work;
// and the stand-in image of BuildImage, which the tests import into the node's
// containerd under the name the sidecar asks for (loop.DockerImage), has it as
// /usr/local/bin/dockerd. It is test infrastructure: nothing of the product
// uses it.
package fakedocker
