// Package stack runs the local stack of real servers the product is tested and
// demonstrated against: dynalite (the DynamoDB API, from npm), a Kubernetes
// control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// built from the Go module proxy by local/kube-build.sh) and, with Options.Node,
// one node that runs real containers: a kubelet (same build) on containerd and
// runc from Debian, with a pause image built here (no registry is reachable).
// Everything listens on 127.0.0.1 only.
//
// Up starts the servers and writes, in the stack's directory, a kubeconfig, an env
// file and a state file naming their process ids; Down stops them in the reverse
// order: kubelet, the node's containers, containerd, scheduler, controller-manager,
// apiserver, etcd, dynalite, and unmounts what the node mounted. Up is idempotent:
// when the state file names a healthy stack, it is reused. RestartKubelet restarts
// the node's kubelet under its running containers (a fault for the chaos suite).
package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/runnerscaler/runnerscaler/local/ociimage"
)

// Options says where the stack lives and how its processes relate to the caller.
type Options struct {
	// Dir holds the stack's state: pki/, etcd/, dynamo/, logs/, kubeconfig, env, state.json.
	Dir string
	// Root is the repository root, where local/dynalite and local/kube-build.sh are.
	Root string
	// KubeBinDir, when set, holds prebuilt etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler and kubelet; otherwise local/kube-build.sh builds (or finds in its
	// cache) them.
	KubeBinDir string
	// Node also starts kube-scheduler, containerd and a kubelet, and Up returns once
	// the node is Ready and schedulable. It needs root, and containerd, runc and the
	// CNI plugins from Debian: Up installs what is missing when it runs as root on a
	// machine with apt-get, and otherwise says how to.
	Node bool
	// Detach lets the servers outlive the calling process (the `stack up` command);
	// otherwise they are killed when it exits (tests).
	Detach bool
	// PersistDynamo keeps dynalite's data in Dir/dynamo across restarts (make run);
	// otherwise it is in memory.
	PersistDynamo bool
	// Progress receives human-readable progress lines; nil discards them.
	Progress io.Writer
}

// Stack is a running local stack.
type Stack struct {
	// DynamoEndpoint is dynalite's URL, e.g. http://127.0.0.1:41234.
	DynamoEndpoint string `json:"dynamoEndpoint"`
	// Kubeconfig is the path of an admin kubeconfig for the API server.
	Kubeconfig string `json:"kubeconfig"`
	// ContainerdAddress is the unix socket of the node's containerd (ociimage.Import,
	// ctr --address); empty when the stack runs no node.
	ContainerdAddress string `json:"containerdAddress,omitempty"`
	// NodeName is the name of the stack's node; empty when it runs none.
	NodeName string `json:"nodeName,omitempty"`
	// Procs are the servers, in start order.
	Procs []Proc `json:"procs"`

	dir    string
	server string // the API server's URL
	cmds   []*exec.Cmd
}

// Proc names one server process of the stack.
type Proc struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// Cmd is its command line, the binary's path absolute, so that it can be
	// started again as it was (RestartKubelet). The environment the stack added to
	// the caller's, if any, is not recorded.
	Cmd []string `json:"cmd,omitempty"`
}

// Proc returns the stack's process named name (kubelet, containerd, etcd, ...).
func (s *Stack) Proc(name string) (Proc, bool) {
	i := slices.IndexFunc(s.Procs, func(p Proc) bool { return p.Name == name })
	if i < 0 {
		return Proc{}, false
	}
	return s.Procs[i], true
}

const stateFile = "state.json"

// Up starts the stack in opts.Dir, or returns the one already running there.
func Up(ctx context.Context, opts Options) (*Stack, error) {
	dir, err := filepath.Abs(opts.Dir) // the processes' command lines must work from anywhere (RestartKubelet)
	if err != nil {
		return nil, fmt.Errorf("stack dir: %w", err)
	}
	opts.Dir = dir
	if err := os.MkdirAll(filepath.Join(opts.Dir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("creating stack dir: %w", err)
	}
	if s, err := Load(opts.Dir); err == nil && (s.NodeName != "" || !opts.Node) && s.healthy(ctx) == nil {
		progress(opts, "stack: already running in %s", opts.Dir)
		return s, nil
	}
	if opts.Node {
		if err := nodePrerequisites(ctx, thisHost()); err != nil {
			return nil, err
		}
	}
	if err := Down(opts.Dir); err != nil { // leftovers of a stack that is not healthy
		progress(opts, "stack: stopping the previous stack: %v", err)
	}
	bins, err := kubeBinaries(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := checkBinaries(bins, opts.Node); err != nil {
		return nil, err
	}
	s := &Stack{dir: opts.Dir}
	if err := s.start(ctx, opts, bins); err != nil {
		_ = s.Stop()
		return nil, err
	}
	if err := s.save(); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Stack) start(ctx context.Context, opts Options, bins string) error {
	started := time.Now()
	if err := s.startDynalite(ctx, opts); err != nil {
		return err
	}
	p, err := newPKI(filepath.Join(opts.Dir, "pki"))
	if err != nil {
		return err
	}
	etcdURL, err := s.startEtcd(ctx, opts, bins)
	if err != nil {
		return err
	}
	if err := s.startAPIServer(ctx, opts, bins, p, etcdURL); err != nil {
		return err
	}
	if err := s.startControllerManager(opts, bins); err != nil {
		return err
	}
	if opts.Node {
		if err := s.startNode(ctx, opts, bins, p); err != nil {
			return err
		}
		s.NodeName = NodeName
	}
	progress(opts, "stack: ready in %.1fs (dynamodb %s, kubeconfig %s)", time.Since(started).Seconds(), s.DynamoEndpoint, s.Kubeconfig)
	return nil
}

func (s *Stack) startDynalite(ctx context.Context, opts Options) error {
	portFile := filepath.Join(opts.Dir, "dynalite.port")
	_ = os.Remove(portFile)
	args := []string{filepath.Join(opts.Root, "local", "dynalite", "server.js"), "--port-file", portFile}
	if opts.PersistDynamo {
		args = append(args, "--path", filepath.Join(opts.Dir, "dynamo"))
	}
	if err := s.spawn(opts, nil, "dynalite", "node", args...); err != nil {
		return err
	}
	var port string
	err := poll(ctx, 20*time.Second, func() error {
		raw, err := os.ReadFile(portFile)
		if err != nil {
			return s.exited("dynalite", err)
		}
		port = strings.TrimSpace(string(raw))
		return nil
	})
	if err != nil {
		return fmt.Errorf("starting dynalite (did `npm ci` run in local/dynalite?): %w", err)
	}
	s.DynamoEndpoint = "http://127.0.0.1:" + port
	return nil
}

func (s *Stack) startEtcd(ctx context.Context, opts Options, bins string) (string, error) {
	clientURL := "http://127.0.0.1:" + strconv.Itoa(freePort())
	peerURL := "http://127.0.0.1:" + strconv.Itoa(freePort())
	dataDir := filepath.Join(opts.Dir, "etcd")
	_ = os.RemoveAll(dataDir) // the control plane starts empty; only DynamoDB data persists
	err := s.spawn(opts, nil, "etcd", filepath.Join(bins, "etcd"),
		"--name=local", "--data-dir="+dataDir, "--unsafe-no-fsync",
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=local="+peerURL, "--log-level=warn")
	if err != nil {
		return "", err
	}
	err = poll(ctx, 30*time.Second, func() error {
		resp, err := http.Get(clientURL + "/health")
		if err != nil {
			return s.exited("etcd", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd health: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("starting etcd: %w", err)
	}
	return clientURL, nil
}

func (s *Stack) startAPIServer(ctx context.Context, opts Options, bins string, p *pki, etcdURL string) error {
	port := freePort()
	err := s.spawn(opts, nil, "kube-apiserver", filepath.Join(bins, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+p.path("apiserver.crt"), "--tls-private-key-file="+p.path("apiserver.key"),
		"--client-ca-file="+p.path("ca.crt"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		// The API server reaches the kubelet on loopback (the node's Hostname is
		// localhost) and checks its serving certificate.
		"--kubelet-preferred-address-types=Hostname",
		"--kubelet-certificate-authority="+p.path("ca.crt"),
		"--kubelet-client-certificate="+p.path("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+p.path("apiserver-kubelet-client.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+p.path("sa.pub"),
		"--service-account-signing-key-file="+p.path("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--allow-privileged=true", "--profiling=false")
	if err != nil {
		return err
	}
	s.Kubeconfig = filepath.Join(opts.Dir, "kubeconfig")
	s.server = "https://127.0.0.1:" + strconv.Itoa(port)
	if err := writeKubeconfig(s.Kubeconfig, s.server, p, "admin"); err != nil {
		return err
	}
	if err := poll(ctx, 90*time.Second, func() error {
		if err := s.apiReady(ctx); err != nil {
			return s.exited("kube-apiserver", err)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("starting kube-apiserver (log: %s): %w", s.logPath("kube-apiserver"), err)
	}
	return nil
}

func (s *Stack) startControllerManager(opts Options, bins string) error {
	// The node-lifecycle controller removes the not-ready taint a kubelet registers
	// its node with, once the node is Ready. The disruption controller computes
	// the PodDisruptionBudgets' status, which the eviction API decides by.
	return s.spawn(opts, nil, "kube-controller-manager", filepath.Join(bins, "kube-controller-manager"),
		"--kubeconfig="+s.Kubeconfig,
		"--leader-elect=false", "--secure-port=0",
		"--controllers=statefulset-controller,garbage-collector-controller,namespace-controller,node-lifecycle-controller,disruption-controller",
		"--node-monitor-period=2s",
		"--concurrent-statefulset-syncs=10",
		// The default 20 requests a second, shared by its controllers, lets the
		// disruption controller's status writes for thousands of runners' budgets
		// starve the StatefulSet controller's pod creation for minutes.
		"--kube-api-qps=200", "--kube-api-burst=400",
		"--use-service-account-credentials=false")
}

// apiReady asks the API server's /readyz with the admin credentials.
func (s *Stack) apiReady(ctx context.Context) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.Timeout = 2 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building client: %w", err)
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("readyz: %w", err)
	}
	if string(body) != "ok" {
		return fmt.Errorf("readyz: %s", body)
	}
	return nil
}

// healthy reports whether every process of a loaded stack is alive and serving.
func (s *Stack) healthy(ctx context.Context) error {
	for _, p := range s.Procs {
		if !alive(p.PID) {
			return fmt.Errorf("%s (pid %d) is not running", p.Name, p.PID)
		}
	}
	resp, err := http.Get(s.DynamoEndpoint)
	if err != nil {
		return fmt.Errorf("dynalite: %w", err)
	}
	resp.Body.Close()
	if err := s.apiReady(ctx); err != nil {
		return err
	}
	if s.NodeName != "" {
		return s.nodeReady(ctx, time.Time{})
	}
	return nil
}

// spawn starts a server with the caller's environment plus env, its log truncated.
func (s *Stack) spawn(opts Options, env []string, name, bin string, args ...string) error {
	cmd, err := s.launch(name, exec.Command(bin, args...), env, os.O_TRUNC, opts.Detach)
	if err != nil {
		return err
	}
	progress(opts, "stack: started %s (pid %d, log %s)", name, cmd.Process.Pid, s.logPath(name))
	s.cmds = append(s.cmds, cmd)
	s.Procs = append(s.Procs, Proc{Name: name, PID: cmd.Process.Pid, Cmd: cmd.Args})
	return nil
}

// launch starts cmd in a process group of its own, writing to name's log (opened
// with logMode: os.O_TRUNC or os.O_APPEND); unless detach, it is killed when the
// calling thread exits. cmd.Args[0] is made the binary's absolute path.
func (s *Stack) launch(name string, cmd *exec.Cmd, env []string, logMode int, detach bool) (*exec.Cmd, error) {
	if cmd.Err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, cmd.Err)
	}
	bin, err := filepath.Abs(cmd.Path)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	cmd.Path, cmd.Args[0] = bin, bin
	logf, err := os.OpenFile(s.logPath(name), os.O_CREATE|os.O_WRONLY|logMode, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return cmd, nil
}

// exited turns a readiness failure into a fatal one when the process has died.
func (s *Stack) exited(name string, cause error) error {
	for i, p := range s.Procs {
		if p.Name == name && i < len(s.cmds) && !alive(p.PID) {
			return stop{fmt.Errorf("%s exited (log %s): %w", name, s.logPath(name), cause)}
		}
	}
	return cause
}

func (s *Stack) logPath(name string) string { return filepath.Join(s.dir, "logs", name+".log") }

// save writes the state file (by a rename, since tests read it while a fault
// rewrites it) and the env file.
func (s *Stack) save() error {
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding stack state: %w", err)
	}
	tmp := filepath.Join(s.dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return fmt.Errorf("writing stack state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, stateFile)); err != nil {
		return fmt.Errorf("writing stack state: %w", err)
	}
	return os.WriteFile(filepath.Join(s.dir, "env"), []byte(s.EnvFile()), 0o644)
}

// Env is the environment a program needs to use the stack. With a node, it holds
// CONTAINERD_ADDRESS and CONTAINERD_NAMESPACE, which `ctr` reads, so that
// `ctr images ls` after sourcing the env file lists the node's images.
func (s *Stack) Env() map[string]string {
	env := map[string]string{
		"DYNAMODB_ENDPOINT":     s.DynamoEndpoint,
		"KUBECONFIG":            s.Kubeconfig,
		"AWS_REGION":            "us-east-1",
		"AWS_ACCESS_KEY_ID":     "local",
		"AWS_SECRET_ACCESS_KEY": "local",
	}
	if s.ContainerdAddress != "" {
		env[EnvContainerdAddress] = s.ContainerdAddress
		env["CONTAINERD_NAMESPACE"] = ociimage.Namespace
	}
	return env
}

// EnvContainerdAddress names the node's containerd socket in Env.
const EnvContainerdAddress = "CONTAINERD_ADDRESS"

// EnvFile renders Env as shell `export` lines, sorted.
func (s *Stack) EnvFile() string {
	var b strings.Builder
	env := s.Env()
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "export %s=%s\n", k, env[k])
	}
	return b.String()
}

// Load reads the state of a stack started in dir (it may have died since).
func Load(dir string) (*Stack, error) {
	raw, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("reading stack state: %w", err)
	}
	s := &Stack{dir: dir}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", filepath.Join(dir, stateFile), err)
	}
	return s, nil
}

// Down stops the stack whose state is in dir, if any, and removes the state file.
// Without a state file, it still unmounts what a node may have left mounted in dir.
func Down(dir string) error {
	s, err := Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		return unmountUnder(dir)
	}
	if err != nil {
		return err
	}
	return s.Stop()
}

// Stop terminates the stack's processes in reverse start order, each given 10 s
// to exit after SIGTERM before SIGKILL, and removes the state file. The node's
// containers are deleted between the kubelet and containerd, and what the node
// leaves (shims, mounts, the bridge) is removed after containerd.
func (s *Stack) Stop() error {
	var errs []error
	for _, step := range s.stopSteps() {
		if err := step(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.dir != "" {
		_ = os.Remove(filepath.Join(s.dir, stateFile))
	}
	return errors.Join(errs...)
}

// stopSteps is the teardown, in order; each step runs whatever the previous did.
func (s *Stack) stopSteps() []func() error {
	var steps []func() error
	for i := len(s.Procs) - 1; i >= 0; i-- {
		var cmd *exec.Cmd
		if i < len(s.cmds) {
			cmd = s.cmds[i]
		}
		p := s.Procs[i]
		if p.Name == "containerd" {
			steps = append(steps, s.removeContainers)
		}
		steps = append(steps, func() error { return terminate(p, cmd) })
		if p.Name == "containerd" {
			steps = append(steps, s.cleanNode)
		}
	}
	return steps
}

func terminate(p Proc, cmd *exec.Cmd) error {
	if !alive(p.PID) {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cmd != nil {
			_ = cmd.Wait()
			return
		}
		for alive(p.PID) {
			time.Sleep(50 * time.Millisecond)
		}
	}()
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
		<-done
		return fmt.Errorf("%s (pid %d) ignored SIGTERM for 10s and was killed", p.Name, p.PID)
	}
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// /proc/PID/stat: "pid (comm) S ..."; the state follows the last ')'.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func kubeBinaries(ctx context.Context, opts Options) (string, error) {
	if opts.KubeBinDir != "" {
		return opts.KubeBinDir, nil
	}
	progress(opts, "stack: locating Kubernetes binaries (a cold build takes ~23 min; cached afterwards)")
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(opts.Root, "local", "kube-build.sh"))
	cmd.Stderr = opts.Progress
	if opts.Progress == nil {
		cmd.Stderr = io.Discard
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building Kubernetes binaries with local/kube-build.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// checkBinaries fails when bins lacks a binary the stack is about to run.
func checkBinaries(bins string, node bool) error {
	names := []string{"etcd", "kube-apiserver", "kube-controller-manager"}
	if node {
		names = append(names, "kube-scheduler", "kubelet")
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(bins, n)); err != nil {
			return fmt.Errorf("Kubernetes binaries in %s: %w (local/kube-build.sh builds them all)", bins, err)
		}
	}
	return nil
}

func writeKubeconfig(path, server string, p *pki, user string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: p.path("ca.crt")}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: p.path(user + ".crt"), ClientKey: p.path(user + ".key")}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

// stop marks an error that no amount of polling will fix.
type stop struct{ error }

func (e stop) Unwrap() error { return e.error }

func poll(ctx context.Context, limit time.Duration, try func() error) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		err := try()
		var fatal stop
		if err == nil || errors.As(err, &fatal) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", limit, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("no free port on 127.0.0.1: %v", err))
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func progress(opts Options, format string, args ...any) {
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, format+"\n", args...)
	}
}
