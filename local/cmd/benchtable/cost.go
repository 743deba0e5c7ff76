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

// line is one priced item: what, how much, at what unit price. key names it
// among the priced figures the docs quote (pricedFigures).
type line struct {
	key    string
	what   string
	amount float64
	unit   string
	price  float64
}

// perThousandJobs prices the usage of 1,000 jobs that m, BenchmarkCostPer1000Jobs's
// metrics by unit, reports.
func perThousandJobs(m map[string]float64) []line {
	return []line{
		{"lambda-requests", "Lambda requests (webhook + sweeper)", m["webhook-invocations/1k-jobs"] + m["sweeper-invocations/1k-jobs"], "requests", lambdaRequest},
		{"lambda-GB-s", "Lambda duration (webhook + sweeper)", m["webhook-GB-s/1k-jobs"] + m["sweeper-GB-s/1k-jobs"], "GB-s", lambdaGBSecond},
		{"http-api-requests", "API Gateway HTTP API (webhook)", m["webhook-invocations/1k-jobs"], "requests", httpAPIRequest},
		{"dynamodb-RRU", "DynamoDB reads", m["RRU/1k-jobs"], "RRU", dynamoRead},
		{"dynamodb-WRU", "DynamoDB writes", m["WRU/1k-jobs"], "WRU", dynamoWrite},
		{"log-KiB", "CloudWatch Logs ingestion", m["log-KiB/1k-jobs"], "KiB", logsIngestPerKiB},
	}
}

// perMonth prices the schedule's own usage in a month: a sweep of the idle pools
// a minute, each as m reports one.
func perMonth(m map[string]float64) []line {
	sweepGBs := m["idle-sweep-ms"] / 1000 * m["sweeper-memory-MB"] / 1024
	return []line{
		{"lambda-requests", "Lambda requests", schedulePerMonth, "requests", lambdaRequest},
		{"lambda-GB-s", "Lambda duration", schedulePerMonth * sweepGBs, "GB-s", lambdaGBSecond},
		{"dynamodb-RRU", "DynamoDB reads", schedulePerMonth * m["idle-sweep-RRU"], "RRU", dynamoRead},
		{"dynamodb-WRU", "DynamoDB writes", schedulePerMonth * m["idle-sweep-WRU"], "WRU", dynamoWrite},
		{"log-KiB", "CloudWatch Logs ingestion", schedulePerMonth * m["idle-sweep-log-KiB"], "KiB", logsIngestPerKiB},
	}
}

// pricedFigures are the figures of the pricing the docs quote, by name: for
// each line of perThousandJobs, "per-1k-jobs.KEY" its amount and
// "per-1k-jobs.KEY.USD" its cost, "per-1k-jobs.USD" their total; the same with
// "per-month." for perMonth, and "per-month.sweeps".
func pricedFigures(m map[string]float64) map[string]float64 {
	out := map[string]float64{"per-month.sweeps": schedulePerMonth}
	for prefix, lines := range map[string][]line{"per-1k-jobs.": perThousandJobs(m), "per-month.": perMonth(m)} {
		total := 0.0
		for _, l := range lines {
			out[prefix+l.key] = l.amount
			out[prefix+l.key+".USD"] = l.amount * l.price
			total += l.amount * l.price
		}
		out[prefix+"USD"] = total
	}
	return out
}

// printCost prints what the usage BenchmarkCostPer1000Jobs reported costs: per
// 1,000 jobs, and the schedule's fixed cost per month, from the median of each
// metric over the runs, as the docs quote it. Nothing when it did not run.
func printCost(w io.Writer, rows []row) {
	runs := map[string][]float64{}
	for _, r := range rows {
		if strings.HasSuffix(r.bench, costBench) {
			if v, err := strconv.ParseFloat(r.value, 64); err == nil {
				runs[r.metric] = append(runs[r.metric], v)
			}
		}
	}
	if len(runs) == 0 {
		return
	}
	m := map[string]float64{}
	for unit, vs := range runs {
		m[unit] = median(vs)
	}
	fmt.Fprintf(w, "\ncost per 1,000 jobs (standard trace, the median of each metric over the runs; on-demand prices, %s, arm64, no free tier; GitHub API calls %.0f, free):\n",
		region, m["github-calls/1k-jobs"])
	printLines(w, perThousandJobs(m))
	fmt.Fprintf(w, "\nthe schedule's own cost per month (%d sweeps of the idle pools, one a minute; GitHub API calls %.0f, free):\n",
		schedulePerMonth, schedulePerMonth*m["idle-sweep-github-calls"])
	printLines(w, perMonth(m))
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
