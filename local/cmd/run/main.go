// Command run is `make run`: it brings up the local stack (dynalite, etcd,
// kube-apiserver, kube-controller-manager), creates the table, serves the real
// webhook handler over HTTP on 127.0.0.1 with the local pools, and runs the sweeper
// in-process (nudged by the webhook, and on a schedule), until Ctrl-C, which stops
// everything.
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/kube"
	"github.com/runnerscaler/runnerscaler/internal/nudge"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		os.Exit(1)
	}
}

// reconciler connects the sweeper to the local kube-apiserver (creating the pools'
// namespaces) and to an in-process GitHub simulator with a fresh App key.
func reconciler(ctx context.Context, pools *pool.Config, s *stack.Stack, clk clock.PassiveClock, log *slog.Logger) (*reconcile.Reconciler, string, error) {
	restCfg, err := kube.FromKubeconfig(s.Kubeconfig)
	if err != nil {
		return nil, "", err
	}
	kc, err := kube.NewClient(restCfg)
	if err != nil {
		return nil, "", err
	}
	for _, p := range pools.Pools {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Kubernetes.Namespace}}
		if _, err := kc.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, "", fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		}
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, "", err
	}
	sim := githubsim.New(githubsim.Options{AppID: 1, AppKey: &key.PublicKey})
	srv := httptest.NewServer(sim.Handler())
	go func() { <-ctx.Done(); srv.Close() }()
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	gh, err := githubapi.New(githubapi.Config{BaseURL: srv.URL, Auth: githubapi.Auth{AppID: 1, InstallationID: 1, PrivateKey: keyPEM}})
	if err != nil {
		return nil, "", err
	}
	rec, err := reconcile.New(pools, kc, gh, clk, log, reconcile.Options{GitHubURL: srv.URL})
	return rec, srv.URL, err
}

// schedule sends the sweeper a scheduled event every interval until ctx ends.
func schedule(ctx context.Context, sw *sweeper.Sweeper, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = sw.Handle(ctx, sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"})
		}
	}
}

func run() error {
	poolsFile := flag.String("pools", "local/pools.yaml", "pools config file")
	addr := flag.String("listen", "127.0.0.1:8080", "address of the webhook endpoint")
	secret := flag.String("secret", "local-webhook-secret", "webhook secret (the one local/events are signed with)")
	tableName := flag.String("table", "runnerscaler", "DynamoDB table on the local dynalite")
	every := flag.Duration("sweep-every", 15*time.Second, "schedule of the sweeper (in AWS: rate(1 minute))")
	flag.Parse()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))

	pools, err := pool.Load(*poolsFile)
	if err != nil {
		return err
	}
	root, _ := os.Getwd()
	s, err := stack.Up(ctx, stack.Options{Dir: filepath.Join(root, ".stack"), Root: root, PersistDynamo: true,
		KubeBinDir: os.Getenv("RUNNERSCALER_KUBE_BIN"), Progress: os.Stderr})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "run: stopping the local stack")
		_ = s.Stop()
	}()
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.DynamoEndpoint),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	if err := table.Create(ctx, db, *tableName); err != nil {
		return err
	}
	clk := clock.RealClock{}
	store := reservation.New(db, *tableName, clk)
	// The sweeper runs in-process: nudged by the webhook after each queued job, and
	// on a short schedule, against the local kube-apiserver and a GitHub simulator.
	rec, ghURL, err := reconciler(ctx, pools, s, clk, log)
	if err != nil {
		return err
	}
	sw := sweeper.New(pools, store, poolstate.NewStore(db, *tableName),
		poolstate.NewLeases(db, *tableName, clk, 30*time.Second), rec, clk, log, sweeper.Options{})
	nudger := nudge.Func(func(_ context.Context, pool string) error {
		go func() { _, _ = sw.Handle(ctx, sweeper.Event{Pool: pool}) }()
		return nil
	})
	go schedule(ctx, sw, *every)
	h := webhook.New([]byte(*secret), pools, store, webhook.WithLogger(log), webhook.WithNudger(nudger))

	mux := http.NewServeMux()
	mux.Handle("POST /webhook", h.HTTPHandler())
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	fmt.Fprintf(os.Stderr, "\nrun: webhook on http://%s/webhook (secret %q), pools %s, table %s\n"+
		"run: KUBECONFIG=%s  DYNAMODB_ENDPOINT=%s  GitHub simulator %s\nrun: Ctrl-C stops everything\n\n",
		ln.Addr(), *secret, *poolsFile, *tableName, s.Kubeconfig, s.DynamoEndpoint, ghURL)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
