// Command invoke is `make invoke FN=webhook|sweeper EVENT=local/events/<file>.json`:
// it builds the function's real linux bootstrap, runs it under the AWS Lambda
// Runtime Interface Emulator against the local stack (started in .stack if it is
// not running; `make stack-down` stops it), sends the event, and prints the
// response and the init duration. The sweeper talks to an in-process GitHub
// simulator, and is invoked through the entry its event comes through when
// deployed: a drain command through the drain alias, a nudge through the nudge
// alias, anything else unqualified.
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/invoke"
	"github.com/runnerscaler/runnerscaler/local/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "invoke:", err)
		os.Exit(1)
	}
}

func run() error {
	fn := flag.String("fn", "webhook", "function: webhook or sweeper")
	eventFile := flag.String("event", "local/events/webhook-queued.json", "event file")
	poolsFile := flag.String("pools", "local/pools.yaml", "pools file")
	tableName := flag.String("table", "runnerscaler", "table on the local dynalite")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()

	root, _ := os.Getwd()
	event, err := os.ReadFile(*eventFile)
	if err != nil {
		return err
	}
	pools, _ := filepath.Abs(*poolsFile)
	cfg, err := pool.Load(pools)
	if err != nil {
		return err
	}
	s, err := stack.Up(ctx, stack.Options{Dir: filepath.Join(root, ".stack"), Root: root, Detach: true, Progress: os.Stderr})
	if err != nil {
		return err
	}
	if err := prepare(ctx, s, cfg, *tableName); err != nil {
		return err
	}
	env := append(os.Environ(), "TABLE_NAME="+*tableName, "POOLS_CONFIG="+pools, "DYNAMODB_ENDPOINT="+s.DynamoEndpoint,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local")
	switch *fn {
	case "webhook":
		env = append(env, "WEBHOOK_SECRET=local-webhook-secret")
	case "sweeper":
		url, key, stop, err := githubSimulator()
		if err != nil {
			return err
		}
		defer stop()
		env = append(env, "KUBECONFIG="+s.Kubeconfig, "GITHUB_URL="+url, "GITHUB_APP_ID=1", "GITHUB_APP_INSTALLATION_ID=1",
			"GITHUB_APP_PRIVATE_KEY="+key, "RUNNER_GITHUB_URL="+url, invoke.FunctionNameEnv+"="+sweeperEntry(event))
	default:
		return fmt.Errorf("-fn %q: want webhook or sweeper", *fn)
	}
	bootstrap := filepath.Join(root, "bin", "local", *fn, "bootstrap")
	build := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", bootstrap, "./functions/"+*fn)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building %s: %w", *fn, err)
	}
	rie, err := exec.CommandContext(ctx, "bash", "local/rie-build.sh").Output()
	if err != nil {
		return fmt.Errorf("building aws-lambda-rie: %w", err)
	}
	e, err := invoke.Start(ctx, strings.TrimSpace(string(rie)), bootstrap, env)
	if err != nil {
		return err
	}
	defer e.Stop()
	out, err := e.Invoke(ctx, event)
	fmt.Fprint(os.Stderr, e.Logs())
	if err != nil {
		return err
	}
	if d, ok := e.InitDuration(); ok {
		fmt.Fprintf(os.Stderr, "invoke: init duration %s\n", d)
	}
	fmt.Println(string(out))
	return nil
}

// sweeperEntry is the sweeper's name as the emulator should report it: qualified
// with the alias the event comes through when deployed.
func sweeperEntry(event []byte) string {
	const name = "runnerscaler-sweeper"
	var ev sweepevent.Event
	if err := json.Unmarshal(event, &ev); err != nil {
		return name // the sweeper refuses it either way
	}
	switch {
	case ev.Drain != "":
		return name + ":" + sweepevent.DrainAlias
	case ev.Pool != "":
		return name + ":" + sweepevent.NudgeAlias
	}
	return name
}

// prepare creates the table and the pools' namespaces (both idempotent).
func prepare(ctx context.Context, s *stack.Stack, cfg *pool.Config, tableName string) error {
	if err := table.Create(ctx, s.DynamoDB(), tableName); err != nil {
		return err
	}
	kc, err := s.Kube()
	if err != nil {
		return err
	}
	var names []string
	for _, p := range cfg.Pools {
		names = append(names, p.Kubernetes.Namespace)
	}
	return stack.EnsureNamespaces(ctx, kc, names...)
}

func githubSimulator() (url, keyPEM string, stop func(), err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", nil, err
	}
	sim := githubsim.New(githubsim.Options{AppID: 1, AppKey: &key.PublicKey})
	srv := httptest.NewServer(sim.Handler())
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return srv.URL + "/", string(pemKey), srv.Close, nil
}
