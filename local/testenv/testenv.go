// Package testenv gives tests real servers: a fresh DynamoDB table on dynalite and
// a fresh namespace on a real kube-apiserver (with controller-manager, scheduler
// and a node whose kubelet runs pods as real containers), all from the local stack.
//
// `make test` starts one stack and passes it to every test binary through
// RUNNERSCALER_TEST_DYNAMODB and RUNNERSCALER_TEST_KUBECONFIG (never KUBECONFIG, so
// tests cannot touch a developer's real cluster), and RUNNERSCALER_TEST_STACK_DIR,
// the stack's directory, for tests that act on the stack itself (StackDir).
// Without the first two, the first test that asks starts a private stack for its
// test binary, which Main stops; it has a node unless RUNNERSCALER_NODE=0 (the
// node needs root). A test that cannot get its servers fails; it is never skipped.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/local/ociimage"
	"github.com/runnerscaler/runnerscaler/local/stack"
)

// Environment variables through which `make test` hands its stack to test binaries.
const (
	EnvDynamoDB   = "RUNNERSCALER_TEST_DYNAMODB"
	EnvKubeconfig = "RUNNERSCALER_TEST_KUBECONFIG"
	EnvStackDir   = "RUNNERSCALER_TEST_STACK_DIR"
)

var (
	once    sync.Once
	shared  servers
	private *stack.Stack
)

type servers struct {
	dynamoEndpoint string
	kubeconfig     string
	stackDir       string // empty when the stack was handed over without it
	err            error
}

// Main runs the package's tests and then stops a stack this binary started, if any.
// What client-go logs meanwhile is printed after the run (heldLog).
// Call it from TestMain.
func Main(m *testing.M) {
	printHeld := holdKlog()
	code := m.Run()
	printHeld()
	if private != nil {
		dir := filepath.Dir(private.Kubeconfig)
		// Down reads the state file, which names a restarted kubelet's new pid.
		if err := stack.Down(dir); err != nil {
			// Its directory stays: never remove through a mount Down left.
			fmt.Fprintf(os.Stderr, "testenv: stopping the stack in %s: %v\n", dir, err)
		} else {
			_ = os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

func get(t testing.TB) servers {
	t.Helper()
	once.Do(func() {
		shared.dynamoEndpoint = os.Getenv(EnvDynamoDB)
		shared.kubeconfig = os.Getenv(EnvKubeconfig)
		shared.stackDir = os.Getenv(EnvStackDir)
		if shared.dynamoEndpoint != "" && shared.kubeconfig != "" {
			return
		}
		shared.err = startPrivate()
	})
	if shared.err != nil {
		t.Fatalf("testenv: no local stack: %v", shared.err)
	}
	return shared
}

func startPrivate() error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "runnerscaler-teststack-")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	s, err := stack.Up(ctx, stack.Options{Dir: dir, Root: root, Progress: os.Stderr,
		KubeBinDir: os.Getenv("RUNNERSCALER_KUBE_BIN"), Node: os.Getenv("RUNNERSCALER_NODE") != "0"})
	if err != nil {
		return err
	}
	private = s
	shared.dynamoEndpoint, shared.kubeconfig, shared.stackDir = s.DynamoEndpoint, s.Kubeconfig, filepath.Dir(s.Kubeconfig)
	return nil
}

// RepoRoot is the directory of the repository's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(raw), "module github.com/runnerscaler/runnerscaler\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no runnerscaler go.mod above the working directory")
		}
		dir = parent
	}
}

// Name returns a unique, DNS-1123-safe name starting with prefix.
func Name(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// DynamoDBClient returns a client for the shared dynalite, with static local credentials.
func DynamoDBClient(t testing.TB) *dynamodb.Client {
	s := get(t)
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.dynamoEndpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
	})
}

// DynamoDBEndpoint is the shared dynalite's URL.
func DynamoDBEndpoint(t testing.TB) string { return get(t).dynamoEndpoint }

// Table creates a fresh table with the product's schema and deletes it after the test.
func Table(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	client := DynamoDBClient(t)
	name := Name("t")
	if err := table.Create(context.Background(), client, name); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return client, name
}

// RESTConfig is the admin configuration of the shared API server.
func RESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", get(t).kubeconfig)
	if err != nil {
		t.Fatalf("testenv: loading kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg
}

// Kubeconfig is the path of the shared API server's admin kubeconfig.
func Kubeconfig(t testing.TB) string { return get(t).kubeconfig }

// Namespace creates a fresh namespace and deletes it (with everything in it) after the test.
func Namespace(t testing.TB) (kubernetes.Interface, string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(RESTConfig(t))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	ns := Name("t")
	_, err = cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: creating namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	return cs, ns
}

// StackDir is the directory of the stack the tests use, for tests that act on the
// stack itself (stack.RestartKubelet). The test fails when the stack was handed
// over without it (RUNNERSCALER_TEST_STACK_DIR unset), or when the stack there is
// not the one whose API server the tests use.
func StackDir(t testing.TB) string {
	t.Helper()
	srv := get(t)
	if srv.stackDir == "" {
		t.Fatalf("testenv: %s is unset, so the stack's directory is unknown: local/with-stack.sh (make test) sets it with %s",
			EnvStackDir, EnvKubeconfig)
	}
	s, err := stack.Load(srv.stackDir)
	if err != nil {
		t.Fatalf("testenv: %s=%s: %v", EnvStackDir, srv.stackDir, err)
	}
	if s.Kubeconfig != srv.kubeconfig {
		t.Fatalf("testenv: the stack in %s=%s has kubeconfig %s, not %s=%s", EnvStackDir, srv.stackDir, s.Kubeconfig, EnvKubeconfig, srv.kubeconfig)
	}
	return srv.stackDir
}

// ContainerdAddress is the unix socket of the stack node's containerd, found in the
// state of the stack whose kubeconfig the tests use; the test fails when that
// stack runs no node.
func ContainerdAddress(t testing.TB) string {
	t.Helper()
	s, err := stack.Load(filepath.Dir(get(t).kubeconfig))
	if err != nil {
		t.Fatalf("testenv: the stack's state: %v", err)
	}
	if s.ContainerdAddress == "" {
		t.Fatalf("testenv: the stack runs no node (started with RUNNERSCALER_NODE=0?)")
	}
	return s.ContainerdAddress
}

// ImportImage loads an image tarball (local/ociimage.Build) into the node's
// containerd, for pods with imagePullPolicy Never or IfNotPresent.
func ImportImage(t testing.TB, tarball string) {
	t.Helper()
	if err := ociimage.Import(t.Context(), ContainerdAddress(t), tarball); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// UserRESTConfig is a configuration that authenticates as user in groups (a client
// certificate from the stack's CA), for tests of RBAC rules.
func UserRESTConfig(t testing.TB, user string, groups []string) *rest.Config {
	t.Helper()
	path, err := stack.UserKubeconfig(get(t).kubeconfig, user, groups)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return cfg
}

// Roster is a roster (roster.Store) in a fresh table of the shared dynalite.
func Roster(t testing.TB) *roster.Store {
	t.Helper()
	db, name := Table(t)
	return roster.NewStore(db, name)
}
