package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// costBench is the benchmark whose usage printCost prices (tests/bench_test.go).
const costBench = "CostPer1000Jobs"

// Prices: on-demand list prices in us-east-1 (N. Virginia), without free tiers,
// as AWS published them in 2025. Lambda duration is at the arm64 rate, the
// template's default Architecture (x86_64: $0.0000166667 per GB-second).
const (
	region           = "us-east-1"
	lambdaRequest    = 0.20 / 1e6       // per invocation
	lambdaGBSecond   = 0.0000133334     // arm64, first 7.5 billion GB-s a month
	httpAPIRequest   = 1.00 / 1e6       // API Gateway HTTP API, first 300 million a month
	dynamoRead       = 0.125 / 1e6      // per read request unit, on-demand
	dynamoWrite      = 0.625 / 1e6      // per write request unit, on-demand
	logsIngestPerKiB = 0.50 / (1 << 20) // CloudWatch Logs ingestion, $0.50 per GB
	schedulePerMonth = 30 * 24 * 60     // sweeps a month at the deployed rate, one a minute
)

// line is one priced item: what, how much, at what unit price.
type line struct {
	what   string
	amount float64
	unit   string
	price  float64
}

// printCost prints what the usage BenchmarkCostPer1000Jobs reported costs: per
// 1,000 jobs, and the schedule's fixed cost per month. Nothing when it did not run.
func printCost(w io.Writer, rows []row) {
	m := map[string]float64{}
	for _, r := range rows {
		if strings.HasSuffix(r.bench, costBench) {
			if v, err := strconv.ParseFloat(r.value, 64); err == nil {
				m[r.metric] = v
			}
		}
	}
	if len(m) == 0 {
		return
	}
	perJob := []line{
		{"Lambda requests (webhook + sweeper)", m["webhook-invocations/1k-jobs"] + m["sweeper-invocations/1k-jobs"], "requests", lambdaRequest},
		{"Lambda duration (webhook + sweeper)", m["webhook-GB-s/1k-jobs"] + m["sweeper-GB-s/1k-jobs"], "GB-s", lambdaGBSecond},
		{"API Gateway HTTP API (webhook)", m["webhook-invocations/1k-jobs"], "requests", httpAPIRequest},
		{"DynamoDB reads", m["RRU/1k-jobs"], "RRU", dynamoRead},
		{"DynamoDB writes", m["WRU/1k-jobs"], "WRU", dynamoWrite},
		{"CloudWatch Logs ingestion", m["log-KiB/1k-jobs"], "KiB", logsIngestPerKiB},
	}
	fmt.Fprintf(w, "\ncost per 1,000 jobs (standard trace; on-demand prices, %s, arm64, no free tier; GitHub API calls %.0f, free):\n",
		region, m["github-calls/1k-jobs"])
	printLines(w, perJob)
	sweepGBs := m["idle-sweep-ms"] / 1000 * m["sweeper-memory-MB"] / 1024
	fixed := []line{
		{"Lambda requests", schedulePerMonth, "requests", lambdaRequest},
		{"Lambda duration", schedulePerMonth * sweepGBs, "GB-s", lambdaGBSecond},
		{"DynamoDB reads", schedulePerMonth * m["idle-sweep-RRU"], "RRU", dynamoRead},
		{"DynamoDB writes", schedulePerMonth * m["idle-sweep-WRU"], "WRU", dynamoWrite},
		{"CloudWatch Logs ingestion", schedulePerMonth * m["idle-sweep-log-KiB"], "KiB", logsIngestPerKiB},
	}
	fmt.Fprintf(w, "\nthe schedule's own cost per month (%d sweeps of the idle pools, one a minute; GitHub API calls %.0f, free):\n",
		schedulePerMonth, schedulePerMonth*m["idle-sweep-github-calls"])
	printLines(w, fixed)
}

func printLines(w io.Writer, lines []line) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	total := 0.0
	for _, l := range lines {
		cost := l.amount * l.price
		total += cost
		fmt.Fprintf(tw, "  %s\t%.0f %s\tat $%.4g\t$%.4f\n", l.what, l.amount, l.unit, l.price, cost)
	}
	fmt.Fprintf(tw, "  total\t\t\t$%.4f\n", total)
	_ = tw.Flush()
}
