// Command run is `make run`: the whole system on the local stack. It brings up
// dynalite, etcd, kube-apiserver, kube-controller-manager and the node
// (kube-scheduler, a kubelet on containerd and runc), builds the runner image
// (local/runnerimage) and imports it into the node as
// localhost/runnerscaler/runner:local (the image local/pools.yaml names), then
// runs the closed loop (package loop): the real webhook handler on
// http://127.0.0.1:8080/webhook, the real sweeper (nudged, and on a short
// schedule), the GitHub simulator acting as the Actions service, and runners as
// real pods on the node (runner/entrypoint.sh around the fake actions runner). A
// job stream — a generated one by default, or -trace FILE — runs through it while
// a table per pool refreshes every second; Ctrl-C (or -until-idle) stops
// everything and prints a summary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/stack"
)

type flags struct {
	pools, trace, listen, secret, logFile string
	jobs                                  int
	rate                                  float64
	minDur, maxDur, every                 time.Duration
	untilIdle                             bool
}

func main() {
	var f flags
	flag.StringVar(&f.pools, "pools", "local/pools.yaml", "pools config file")
	flag.StringVar(&f.trace, "trace", "", "job trace (YAML list of {at, repository, organization, labels, duration}); default: generated jobs")
	flag.IntVar(&f.jobs, "jobs", 40, "generated jobs")
	flag.Float64Var(&f.rate, "rate", 2, "generated jobs per second (Poisson arrivals)")
	flag.DurationVar(&f.minDur, "min-duration", 2*time.Second, "shortest generated job")
	flag.DurationVar(&f.maxDur, "max-duration", 8*time.Second, "longest generated job")
	flag.DurationVar(&f.every, "sweep-every", 5*time.Second, "sweeper schedule (AWS: 1 minute)")
	flag.StringVar(&f.listen, "listen", "127.0.0.1:8080", "webhook address")
	flag.StringVar(&f.secret, "secret", "local-webhook-secret", "webhook secret (local/events are signed with the default)")
	flag.StringVar(&f.logFile, "log", ".stack/run.log", "where the components' logs go")
	flag.BoolVar(&f.untilIdle, "until-idle", false, "stop once every job is done and no runner is left")
	flag.Parse()
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		os.Exit(1)
	}
}

func run(f flags) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cfg, err := pool.Load(f.pools)
	if err != nil {
		return err
	}
	jobs := loop.Generate(cfg, f.jobs, f.rate, f.minDur, f.maxDur, uint64(time.Now().UnixNano()))
	if f.trace != "" {
		if jobs, err = loop.LoadTrace(f.trace); err != nil {
			return err
		}
	}
	root, _ := os.Getwd()
	s, err := stack.Up(ctx, stack.Options{Dir: filepath.Join(root, ".stack"), Root: root, Progress: os.Stderr, Node: true})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "run: stopping the local stack")
		_ = s.Stop()
	}()
	logs, err := os.Create(f.logFile)
	if err != nil {
		return err
	}
	defer logs.Close()
	log := slog.New(slog.NewTextHandler(logs, nil))
	fmt.Fprintln(os.Stderr, "run: building the runner image and importing it into the node")
	img, err := loop.RunnerImage(ctx, s.ContainerdAddress, log)
	if err != nil {
		return err
	}
	if err := loop.TagImage(ctx, s.ContainerdAddress, img, LocalImage); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "run: runner image %s, imported as %s\n", img, LocalImage)
	tableName := "runnerscaler-" + time.Now().UTC().Format("20060102-150405")
	l, err := startLoop(ctx, s, cfg, f, tableName, log)
	if err != nil {
		return err
	}
	defer l.Stop()
	fmt.Fprintf(os.Stderr, "run: webhook %s (secret %q), %d jobs, logs in %s, KUBECONFIG=%s\n",
		l.WebhookURL, f.secret, len(jobs), f.logFile, s.Kubeconfig)
	hint := statusHint(filepath.Dir(s.Kubeconfig), tableName, f.pools)
	go l.Play(ctx, jobs)
	view(ctx, l, len(jobs), f.untilIdle, hint)
	summary(l)
	fmt.Println(hint)
	return nil
}

// LocalImage is the runner image's name in local/pools.yaml.
const LocalImage = "localhost/runnerscaler/runner:local"

// statusHint says how to ask `runnerscaler status` about the running loop (from
// another terminal, while it runs): the stack's env file sets the endpoint, the
// kubeconfig and local AWS credentials.
func statusHint(dir, tableName, pools string) string {
	return fmt.Sprintf("status: source %s/env && go run ./cmd/runnerscaler status -table %s -pools %s  (POOL, --job ID, -o json)",
		dir, tableName, pools)
}

func startLoop(ctx context.Context, s *stack.Stack, cfg *pool.Config, f flags, tableName string, log *slog.Logger) (*loop.Loop, error) {
	db := s.DynamoDB()
	if err := table.Create(ctx, db, tableName); err != nil {
		return nil, err
	}
	kc, err := s.Kube()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range cfg.Pools {
		names = append(names, p.Kubernetes.Namespace)
	}
	if err := stack.EnsureNamespaces(ctx, kc, names...); err != nil {
		return nil, err
	}
	return loop.Start(ctx, loop.Options{Pools: cfg, DB: db, Table: tableName, Kube: kc, SweepEvery: f.every,
		Secret: f.secret, WebhookAddr: f.listen, Log: log})
}

// view refreshes a table per pool every second until ctx ends (or, with
// untilIdle, the stream is done and no runner is left).
func view(ctx context.Context, l *loop.Loop, total int, untilIdle bool, hint string) {
	start := time.Now()
	tty := isTTY()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stats := l.Stats(ctx)
		var b strings.Builder
		if tty {
			b.WriteString("\033[H\033[2J")
		}
		fmt.Fprintf(&b, "runnerscaler local loop — %s — webhook %s — Ctrl-C stops\n%s\n\n", time.Since(start).Round(time.Second), l.WebhookURL, hint)
		fmt.Fprintf(&b, "%-14s %7s %8s %8s %8s %9s %8s %6s %9s %9s\n", "POOL", "QUEUED", "DESIRED", "PENDING", "RUNNING", "STOPPING", "JOBS-ON", "DONE", "WAIT-P50", "WAIT-P95")
		done, idle := 0, true
		for _, s := range stats {
			fmt.Fprintf(&b, "%-14s %7d %8d %8d %8d %9d %8d %6d %9s %9s\n", s.Pool, s.Queued, s.Desired, s.Phases["pending"],
				s.Phases["running"], s.Phases["stopping"]+s.Phases["terminating"], s.Running, s.Done,
				s.WaitP50.Round(10*time.Millisecond), s.WaitP95.Round(10*time.Millisecond))
			done += s.Done
			for _, n := range s.Phases {
				idle = idle && n == 0
			}
		}
		for _, s := range stats {
			for _, name := range slices.Sorted(maps.Keys(s.Stuck)) {
				fmt.Fprintf(&b, "  %s: %s is stuck: %s\n", s.Pool, name, s.Stuck[name])
			}
		}
		fmt.Fprintf(&b, "\njobs %d/%d done, invariant violations: %d\n", done, total, len(l.Monitor.Violations()))
		if tty {
			fmt.Print(b.String())
		} else if int(time.Since(start).Seconds())%5 == 0 {
			fmt.Print(b.String())
		}
		if untilIdle && done == total && idle {
			if left, err := l.Leftovers(ctx); err == nil && len(left) == 0 {
				return
			}
		}
	}
}

func summary(l *loop.Loop) {
	ws, on := l.Waits(), l.Monitor.OnlineLatencies()
	fmt.Printf("\nsummary: %d jobs started, wait p50 %s p95 %s max %s; pod created → runner online p50 %s p95 %s (%d runners); "+
		"%d runner containers restarted after exit 0; invariant violations: %d\n", len(ws),
		loop.Percentile(ws, 50).Round(time.Millisecond), loop.Percentile(ws, 95).Round(time.Millisecond),
		loop.Percentile(ws, 100).Round(time.Millisecond), loop.Percentile(on, 50).Round(time.Millisecond),
		loop.Percentile(on, 95).Round(time.Millisecond), len(on), l.Monitor.RestartsAfterExit0(), len(l.Monitor.Violations()))
	for _, v := range l.Monitor.Violations() {
		fmt.Println("  violation:", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if left, err := l.Leftovers(ctx); err == nil && len(left) > 0 {
		fmt.Printf("left on stop (runners the sweeper had not removed yet): %s\n", strings.Join(left, ", "))
	}
}

func isTTY() bool {
	fi, err := os.Stdout.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && !errors.Is(err, os.ErrNotExist)
}
