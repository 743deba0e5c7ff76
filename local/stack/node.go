package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/local/ociimage"
)

// NodeName is the name the stack's kubelet registers its node under. The API server
// reaches a kubelet (logs, exec, port-forward) by the node's host name
// (--kubelet-preferred-address-types=Hostname): this one resolves to 127.0.0.1, so
// that traffic stays on loopback.
const NodeName = "localhost"

// PauseImage is the pod sandbox image of the stack's containerd, built from
// local/pause and imported at start (no registry is reachable).
const PauseImage = "localhost/runnerscaler/pause:local"

// Debian's packages for the node, which nodePrerequisites installs or names, and
// the directory of its CNI plugins.
const (
	nodePackages = "containerd runc containernetworking-plugins"
	cniBinDir    = "/usr/lib/cni"
	// hostContainerLogs is where every kubelet links its containers' logs
	// (hard-coded upstream); the node's links are removed when it stops.
	hostContainerLogs = "/var/log/containers"
	// hostCNIResults is libcni's cache of the networks it set up.
	hostCNIResults = "/var/lib/cni/results"
)

// nodeHost is what nodePrerequisites asks of the machine.
type nodeHost struct {
	euid     int
	lookPath func(file string) (string, error)
	stat     func(name string) (fs.FileInfo, error)
	// install installs Debian's packages with apt-get, writing apt-get's output to out.
	install func(ctx context.Context, packages []string, out io.Writer) error
	// stderr is told what nodePrerequisites does to the machine.
	stderr io.Writer
}

// thisHost is this machine, as nodePrerequisites sees it.
func thisHost() nodeHost {
	return nodeHost{euid: os.Geteuid(), lookPath: exec.LookPath, stat: os.Stat, install: aptInstall, stderr: os.Stderr}
}

// nodePrerequisites fails, saying what to do, when this machine cannot run the
// node. Run as root on a machine with apt-get, it first installs Debian's
// packages for what is missing, and says so on stderr; anyone else is told the
// command to run.
func nodePrerequisites(ctx context.Context, h nodeHost) error {
	if h.euid != 0 {
		return errors.New("the stack's node (containerd, runc and a kubelet) needs root: " +
			"run as root, e.g. `sudo -E env PATH=\"$PATH\" make test`, or start the stack without a node " +
			"with RUNNERSCALER_NODE=0 (tests that need the node then fail)")
	}
	missing := h.missingForNode()
	if len(missing) == 0 {
		return nil
	}
	if _, err := h.lookPath("apt-get"); err != nil {
		return errNodeMissing(missing)
	}
	fmt.Fprintf(h.stderr, "stack: the node needs %s: installing Debian's packages %s (apt-get, as root)\n",
		strings.Join(missing, ", "), nodePackages)
	if err := h.install(ctx, strings.Fields(nodePackages), h.stderr); err != nil {
		return fmt.Errorf("installing them: %w; %w", err, errNodeMissing(missing))
	}
	if missing := h.missingForNode(); len(missing) > 0 {
		return fmt.Errorf("after installing %s: %w", nodePackages, errNodeMissing(missing))
	}
	return nil
}

// missingForNode lists the node's binaries and CNI plugins this machine lacks.
func (h nodeHost) missingForNode() []string {
	var missing []string
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc"} {
		if _, err := h.lookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := h.stat(filepath.Join(cniBinDir, plugin)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, plugin))
		}
	}
	return missing
}

// errNodeMissing says what the node lacks and the command that installs it.
func errNodeMissing(missing []string) error {
	return fmt.Errorf("the stack's node needs %s: install Debian's packages with "+
		"`apt-get update && apt-get install -y %s`", strings.Join(missing, ", "), nodePackages)
}

// aptInstall runs `apt-get update` and `apt-get install -y packages`, unattended.
func aptInstall(ctx context.Context, packages []string, out io.Writer) error {
	for _, args := range [][]string{{"update", "-q"}, append([]string{"install", "-y", "-q"}, packages...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", args[0], err)
		}
	}
	return nil
}

// node holds the paths of the node's files in the stack directory.
type node struct{ dir string }

func (n node) path(parts ...string) string {
	return filepath.Join(append([]string{n.dir, "node"}, parts...)...)
}

func (n node) socket() string         { return n.path("containerd.sock") }
func (n node) kubeletRoot() string    { return n.path("kubelet") }
func (n node) podLogs() string        { return n.path("pod-logs") }
func (n node) runcRoot() string       { return n.path("runc") }
func (n node) cniConfDir() string     { return n.path("cni", "net.d") }
func (n node) pauseTarball() string   { return n.path("pause", "pause.tar") }
func (n node) containerdConf() string { return n.path("containerd.toml") }

// network names the node's CNI network and bridge after the stack directory, so
// stacks side by side on one machine do not share a bridge or an address range.
func (n node) network() (name, bridge, subnet string) {
	h := fnv.New32a()
	h.Write([]byte(n.dir))
	sum := h.Sum32()
	return fmt.Sprintf("runnerscaler-%08x", sum), fmt.Sprintf("rs%08x", sum), fmt.Sprintf("10.244.%d.0/24", sum%256)
}

// startNode starts kube-scheduler, containerd (with the pause image imported) and
// the kubelet, then waits until the node is Ready and schedulable.
func (s *Stack) startNode(ctx context.Context, opts Options, bins string, p *pki) error {
	started := time.Now()
	n := node{opts.Dir}
	// Never remove through a mount (a pod volume could be a bind mount of a host directory).
	if mounted, err := mountsUnder(n.path()); err != nil || len(mounted) > 0 {
		return fmt.Errorf("the previous node's files are still mounted (%s): %v", strings.Join(mounted, ", "), err)
	}
	if err := os.RemoveAll(n.path()); err != nil {
		return fmt.Errorf("removing the previous node's files: %w", err)
	}
	if err := s.startScheduler(opts, bins, p); err != nil {
		return err
	}
	if err := s.startContainerd(ctx, opts, n); err != nil {
		return err
	}
	if err := s.importPause(ctx, opts, n); err != nil {
		return err
	}
	if err := s.startKubelet(opts, bins, p, n); err != nil {
		return err
	}
	if err := poll(ctx, 2*time.Minute, func() error {
		if err := s.nodeReady(ctx, time.Time{}); err != nil {
			return s.exited("kubelet", err)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("waiting for node %s (log %s): %w", NodeName, s.logPath("kubelet"), err)
	}
	progress(opts, "stack: node %s Ready and schedulable %.1fs after its start", NodeName, time.Since(started).Seconds())
	return nil
}

func (s *Stack) startScheduler(opts Options, bins string, p *pki) error {
	kubeconfig := filepath.Join(opts.Dir, "scheduler.kubeconfig")
	if err := writeKubeconfig(kubeconfig, s.server, p, "scheduler"); err != nil {
		return err
	}
	return s.spawn(opts, nil, "kube-scheduler", filepath.Join(bins, "kube-scheduler"),
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0")
}

func (s *Stack) startContainerd(ctx context.Context, opts Options, n node) error {
	for _, d := range []string{n.path("containerd"), n.path("state"), n.path("opt"), n.path("certs.d"),
		n.cniConfDir(), n.path("cni", "ipam"), n.runcRoot()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	netName, bridge, subnet := n.network()
	// containerd itself runs the loopback plugin from bin_dir for every pod, so the
	// list holds the pod network only. Pods of the stack use hostNetwork; the bridge
	// exists so that the runtime reports its network ready.
	conflist := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q}
  }]
}
`, netName, bridge, subnet, n.path("cni", "ipam"))
	if err := os.WriteFile(filepath.Join(n.cniConfDir(), "10-runnerscaler.conflist"), []byte(conflist), 0o644); err != nil {
		return fmt.Errorf("writing CNI config: %w", err)
	}
	if err := os.WriteFile(n.containerdConf(), []byte(containerdConfig(n)), 0o644); err != nil {
		return fmt.Errorf("writing containerd config: %w", err)
	}
	// No registry is reachable, and none may be tried: an image pull goes through a
	// proxy on a closed loopback port (and a localhost/ image to 127.0.0.1), so a pod
	// whose image is missing fails at once with ErrImagePull instead of reaching out.
	env := []string{"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "NO_PROXY=",
		"http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9", "no_proxy="}
	if err := s.spawn(opts, env, "containerd", "containerd", "--config="+n.containerdConf()); err != nil {
		return err
	}
	s.ContainerdAddress = n.socket()
	err := poll(ctx, 30*time.Second, func() error {
		c, err := net.Dial("unix", n.socket())
		if err != nil {
			return s.exited("containerd", err)
		}
		return c.Close()
	})
	if err != nil {
		return fmt.Errorf("starting containerd: %w", err)
	}
	return nil
}

// containerdConfig is a containerd of the node's own: its root, state, socket and
// runc root in the stack directory, nothing shared with a system containerd.
func containerdConfig(n node) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
oom_score = 0
required_plugins = ["io.containerd.grpc.v1.cri"]
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = %q
[ttrpc]
  address = ""
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # This machine refuses negative oom_score_adj values: runc fails otherwise.
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, n.path("containerd"), n.path("state"), n.socket(), n.path("opt"), PauseImage,
		n.runcRoot(), cniBinDir, n.cniConfDir(), n.path("certs.d"))
}

// importPause builds local/pause into the sandbox image and imports it.
func (s *Stack) importPause(ctx context.Context, opts Options, n node) error {
	bin := n.path("pause", "pause")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./local/pause")
	build.Dir = opts.Root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building local/pause: %w: %s", err, bytes.TrimSpace(out))
	}
	layer := ociimage.Layer{{Path: "/pause", HostPath: bin, Mode: 0o755}}
	if err := ociimage.Build(PauseImage, []ociimage.Layer{layer}, ociimage.Config{Entrypoint: []string{"/pause"}}, n.pauseTarball()); err != nil {
		return err
	}
	return s.ImportImage(ctx, n.pauseTarball())
}

func (s *Stack) startKubelet(opts Options, bins string, p *pki, n node) error {
	kubeconfig := filepath.Join(opts.Dir, "kubelet.kubeconfig")
	if err := writeKubeconfig(kubeconfig, s.server, p, "node"); err != nil {
		return err
	}
	// Pods resolve names through 127.0.0.1, where nothing answers: no DNS query of a
	// container leaves the machine (hostNetwork pods still read the node's /etc/hosts).
	resolv := n.path("resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", resolv, err)
	}
	config := n.path("kubelet.yaml")
	if err := os.WriteFile(config, []byte(kubeletConfig(n, p, freePort(), resolv)), 0o644); err != nil {
		return fmt.Errorf("writing kubelet config: %w", err)
	}
	return s.spawn(opts, nil, "kubelet", filepath.Join(bins, "kubelet"),
		"--config="+config, "--kubeconfig="+kubeconfig,
		"--root-dir="+n.kubeletRoot(), "--cert-dir="+n.path("kubelet-pki"),
		"--hostname-override="+NodeName)
}

// kubeletConfig is the node's KubeletConfiguration: for this machine (cgroup v1, no
// QoS cgroups, no swap check, no negative oom_score_adj), its own API on 127.0.0.1
// for the API server's client certificate only, every path in the stack directory
// except the log links upstream hard-codes, fast status, and no image garbage
// collection or disk-pressure eviction, since images cannot be pulled back.
func kubeletConfig(n node, p *pki, port int, resolv string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzPort: 0
tlsCertFile: %q
tlsPrivateKeyFile: %q
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %q}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: %q
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
oomScoreAdj: 0
podLogsDir: %q
volumePluginDir: %q
resolvConf: %q
syncFrequency: 10s
nodeStatusUpdateFrequency: 2s
nodeStatusReportFrequency: 1m
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "50Mi", nodefs.available: "1%%", nodefs.inodesFree: "1%%", imagefs.available: "1%%", imagefs.inodesFree: "1%%"}
serializeImagePulls: false
`, port, p.path("kubelet-serving.crt"), p.path("kubelet-serving.key"), p.path("ca.crt"),
		"unix://"+n.socket(), n.podLogs(), n.path("volume-plugins"), resolv)
}

// nodeReady reports whether the node is Ready, schedulable and free of taints
// that keep pods off it (the not-ready taint it registers with included), and, if
// since is not zero, whether its kubelet reported it Ready at or after since (a
// heartbeat has a precision of one second: since must be a whole second).
func (s *Stack) nodeReady(ctx context.Context, since time.Time) error {
	cs, err := s.Kube()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	nd, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("node %s: %w", NodeName, err)
	}
	i := slices.IndexFunc(nd.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
	if i < 0 || nd.Status.Conditions[i].Status != corev1.ConditionTrue {
		return fmt.Errorf("node %s is not Ready: %+v", NodeName, nd.Status.Conditions)
	}
	if beat := nd.Status.Conditions[i].LastHeartbeatTime; beat.Time.Before(since) {
		return fmt.Errorf("node %s: last reported Ready at %s, before %s", NodeName, beat.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339))
	}
	if nd.Spec.Unschedulable {
		return fmt.Errorf("node %s is cordoned", NodeName)
	}
	for _, t := range nd.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return fmt.Errorf("node %s has taint %s", NodeName, t.ToString())
		}
	}
	return nil
}

// ImportImage loads an image tarball (ociimage.Build) into the node's containerd,
// where its pods find it without a pull.
func (s *Stack) ImportImage(ctx context.Context, tarball string) error {
	if s.ContainerdAddress == "" {
		return errors.New("importing an image: the stack runs no node (started with Options.Node false)")
	}
	return ociimage.Import(ctx, s.ContainerdAddress, tarball)
}

// removeContainers kills and deletes every task of the node's containerd while
// it still runs (the kubelet is stopped by then), so that their shims exit.
func (s *Stack) removeContainers() error {
	n := node{s.dir}
	if !slices.ContainsFunc(s.Procs, func(p Proc) bool { return p.Name == "containerd" && alive(p.PID) }) {
		return nil // cleanNode deals with what a dead containerd left
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctr := func(args ...string) ([]byte, error) {
		args = append([]string{"--address", n.socket(), "--namespace", ociimage.Namespace}, args...)
		return exec.CommandContext(ctx, "ctr", args...).CombinedOutput()
	}
	out, err := ctr("tasks", "ls", "--quiet")
	if err != nil {
		return fmt.Errorf("listing the node's containers: %w: %s", err, bytes.TrimSpace(out))
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, 8)
	)
	for _, id := range strings.Fields(string(out)) {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			// The CRI plugin deletes a sandbox's task itself when it sees it exit,
			// and a shim exits as its task goes ("ttrpc: closed"): a failed
			// delete of a task no longer listed is done.
			if out, err := ctr("tasks", "delete", "--force", id); err != nil && !bytes.Contains(out, []byte("not found")) && taskListed(ctr, id) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("deleting container %s: %w: %s", id, err, bytes.TrimSpace(out)))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// taskListed reports whether containerd still lists task id (true when it
// cannot tell).
func taskListed(ctr func(...string) ([]byte, error), id string) bool {
	out, err := ctr("tasks", "ls", "--quiet")
	return err != nil || slices.Contains(strings.Fields(string(out)), id)
}

// cleanNode removes what the node can leave behind once containerd is stopped:
// containers runc still knows (a task containerd failed to delete), shims of this
// containerd, mounts in the stack directory, the bridge, and the kubelet's log
// links and CNI cache entries outside it.
func (s *Stack) cleanNode() error {
	n := node{s.dir}
	var errs []error
	runcRoot := filepath.Join(n.runcRoot(), ociimage.Namespace)
	if out, err := exec.Command("runc", "--root", runcRoot, "list", "--quiet").Output(); err == nil {
		for _, id := range strings.Fields(string(out)) {
			if out, err := exec.Command("runc", "--root", runcRoot, "delete", "--force", id).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("runc delete %s: %w: %s", id, err, bytes.TrimSpace(out)))
			}
		}
	}
	for _, pid := range shims(n.socket()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := unmountUnder(s.dir); err != nil {
		errs = append(errs, err)
	}
	netName, bridge, _ := n.network()
	if _, err := net.InterfaceByName(bridge); err == nil {
		if out, err := exec.Command("ip", "link", "delete", bridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting bridge %s: %w: %s", bridge, err, bytes.TrimSpace(out)))
		}
	}
	removeLinksInto(hostContainerLogs, n.podLogs())
	// libcni caches each network it sets up (the pod network, and the loopback
	// network containerd adds) by sandbox id; the stopped kubelet never tore them down.
	cached, _ := filepath.Glob(filepath.Join(hostCNIResults, netName+"-*"))
	sandboxes, _ := os.ReadDir(n.path("state", "io.containerd.grpc.v1.cri", "sandboxes"))
	for _, sb := range sandboxes {
		m, _ := filepath.Glob(filepath.Join(hostCNIResults, "*-"+sb.Name()+"-*"))
		cached = append(cached, m...)
	}
	for _, f := range cached {
		_ = os.Remove(f)
	}
	return errors.Join(errs...)
}

// shims lists the containerd-shim processes serving the containerd at address.
func shims(address string) []int {
	var pids []int
	for _, pid := range processes() {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && slices.Contains(args, address) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func processes() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	var points []string
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	slices.SortStableFunc(points, func(a, b string) int { return len(b) - len(a) })
	return points, nil
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder detaches every mount at or below dir (the kubelet's bind mount of
// its root directory, pod volumes, container root file systems), repeating while
// stacked mounts reveal more.
func unmountUnder(dir string) error {
	for range 10 {
		points, err := mountsUnder(dir)
		if err != nil || len(points) == 0 {
			return err
		}
		for _, p := range points {
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
		}
	}
	points, err := mountsUnder(dir)
	if err == nil && len(points) > 0 {
		err = fmt.Errorf("still mounted after unmounting: %s", strings.Join(points, ", "))
	}
	return err
}

// removeLinksInto removes the symbolic links in dir that point below target.
func removeLinksInto(dir, target string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if dest, err := os.Readlink(p); err == nil && strings.HasPrefix(dest, target+"/") {
			_ = os.Remove(p)
		}
	}
}
