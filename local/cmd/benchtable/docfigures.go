package main

// docFigures are the figures the docs quote from the baseline
// (tests/testdata/bench-baseline.txt): `make bench-accept` rewrites them from
// the baseline it takes (benchtable -docs), and TestDocsQuoteTheBaseline fails
// when a page says otherwise. Each text is as its page writes it (a line break
// written as a space), every number a placeholder {{Benchmark metric format}};
// see figures.go. Keep each one short, one group of figures, and unique on its
// page. The user pages (docs/*.md) get numbers only: no benchmark name.
var docFigures = []figure{
	// The refill of a saturated pool: SaturatedSlotTurnaround.
	{"docs/concepts.md", "a freed slot's next job starts p50 {{SaturatedSlotTurnaround turnaround-p50-ms s.1}} s, " +
		"p95 {{SaturatedSlotTurnaround turnaround-p95-ms s.1}} s"},
	{"docs/concepts.md", "the pod's own start (pod created → job started) is p50 {{SaturatedSlotTurnaround pod-start-p50-ms s.1}} s, " +
		"p95 {{SaturatedSlotTurnaround pod-start-p95-ms s.1}} s"},
	{"docs/concepts.md", "the refill (job ended → replacement pod created) p50 {{SaturatedSlotTurnaround refill-p50-ms s.1}} s, " +
		"p95 {{SaturatedSlotTurnaround refill-p95-ms s.1}} s"},
	{"CONTRIBUTING.md", "slot turnaround p50 {{SaturatedSlotTurnaround turnaround-p50-ms s.1}} s, " +
		"p95 {{SaturatedSlotTurnaround turnaround-p95-ms s.1}} s"},
	{"CONTRIBUTING.md", "= pod's own start p50 {{SaturatedSlotTurnaround pod-start-p50-ms s.1}} s, " +
		"p95 {{SaturatedSlotTurnaround pod-start-p95-ms s.1}} s"},
	{"CONTRIBUTING.md", "+ refill p50 {{SaturatedSlotTurnaround refill-p50-ms s.1}} s, p95 {{SaturatedSlotTurnaround refill-p95-ms s.1}} s"},
	{"CONTRIBUTING.md", "backlog done in {{SaturatedSlotTurnaround backlog-s n}} s (was 547 s); " +
		"{{SaturatedSlotTurnaround github-calls/job n.2}} GitHub calls per job"},

	// The runner's start on the node: RunnerStartup.
	{"CONTRIBUTING.md", "(`BenchmarkRunnerStartup`) | pod created → runner online p50 {{RunnerStartup pod-to-online-p50-ms s.2}} s, " +
		"p95 {{RunnerStartup pod-to-online-p95-ms s.2}} s"},
	{"CONTRIBUTING.md", "job queued → job started p50 {{RunnerStartup queued-to-started-p50-ms s.2}} s, " +
		"p95 {{RunnerStartup queued-to-started-p95-ms s.2}} s"},

	// A queued job to its runner's StatefulSet: QueuedToStatefulSet.
	{"CONTRIBUTING.md", "fast path: p50 {{QueuedToStatefulSet/fastpath=true p50-ms n}} ms, " +
		"p99 {{QueuedToStatefulSet/fastpath=true p99-ms n}} ms; " +
		"schedule only (2 s): p50 {{QueuedToStatefulSet/fastpath=false p50-ms s.1}} s"},

	// A container job's first step: ContainerJobFirstStep.
	{"CONTRIBUTING.md", "`kubernetes`: p50 {{ContainerJobFirstStep/mode=kubernetes queued-to-first-step-p50-ms s.2}} s, " +
		"p95 {{ContainerJobFirstStep/mode=kubernetes queued-to-first-step-p95-ms s.2}} s " +
		"(job started → first step p50 {{ContainerJobFirstStep/mode=kubernetes started-to-first-step-p50-ms s.2}} s:"},
	{"CONTRIBUTING.md", "`kubernetes-novolume`: p50 {{ContainerJobFirstStep/mode=kubernetes-novolume queued-to-first-step-p50-ms s.2}} s, " +
		"p95 {{ContainerJobFirstStep/mode=kubernetes-novolume queued-to-first-step-p95-ms s.2}} s " +
		"(started → first step p50 {{ContainerJobFirstStep/mode=kubernetes-novolume started-to-first-step-p50-ms s.2}} s:"},
	{"CONTRIBUTING.md", "dind pool: p50 {{ContainerJobFirstStep/mode=dind queued-to-first-step-p50-ms s.2}} s, " +
		"p95 {{ContainerJobFirstStep/mode=dind queued-to-first-step-p95-ms s.2}} s " +
		"(started → first step {{ContainerJobFirstStep/mode=dind started-to-first-step-p50-ms s.2}} s"},

	// The cost in AWS: CostPer1000Jobs, priced by cost.go (pricedFigures).
	{"docs/performance-and-cost.md", "template.yaml's memory sizes (webhook {{CostPer1000Jobs webhook-memory-MB n}} MB, " +
		"sweeper {{CostPer1000Jobs sweeper-memory-MB n}} MB)"},
	{"docs/performance-and-cost.md", "| Lambda requests (webhook {{CostPer1000Jobs webhook-invocations/1k-jobs n}}: queued, in_progress, completed; " +
		"sweeper {{CostPer1000Jobs sweeper-invocations/1k-jobs n}}: a nudge per queued job and per completion, and the teardown's scheduled sweeps) " +
		"| {{CostPer1000Jobs per-1k-jobs.lambda-requests n}} | ${{CostPer1000Jobs per-1k-jobs.lambda-requests.USD n.4}} |"},
	{"docs/performance-and-cost.md", "| Lambda duration (webhook {{CostPer1000Jobs webhook-GB-s/1k-jobs n}} GB-s, " +
		"sweeper {{CostPer1000Jobs sweeper-GB-s/1k-jobs n}} GB-s) " +
		"| {{CostPer1000Jobs per-1k-jobs.lambda-GB-s n}} GB-s | ${{CostPer1000Jobs per-1k-jobs.lambda-GB-s.USD n.4}} |"},
	{"docs/performance-and-cost.md", "| API Gateway HTTP API | {{CostPer1000Jobs per-1k-jobs.http-api-requests n}} requests " +
		"| ${{CostPer1000Jobs per-1k-jobs.http-api-requests.USD n.4}} |"},
	{"docs/performance-and-cost.md", "| DynamoDB reads | {{CostPer1000Jobs per-1k-jobs.dynamodb-RRU n}} RRU " +
		"| ${{CostPer1000Jobs per-1k-jobs.dynamodb-RRU.USD n.4}} |"},
	{"docs/performance-and-cost.md", "| DynamoDB writes (deliveries, job↔runner links, leases, status, index) " +
		"| {{CostPer1000Jobs per-1k-jobs.dynamodb-WRU n}} WRU | ${{CostPer1000Jobs per-1k-jobs.dynamodb-WRU.USD n.4}} |"},
	{"docs/performance-and-cost.md", "| CloudWatch Logs (INFO, JSON) | {{CostPer1000Jobs per-1k-jobs.log-KiB MiB.1}} MiB " +
		"| ${{CostPer1000Jobs per-1k-jobs.log-KiB.USD n.4}} |"},
	{"docs/performance-and-cost.md", "| GitHub API calls (JIT config and RemoveRunner per job; delivery log) " +
		"| {{CostPer1000Jobs github-calls/1k-jobs n}} | free |"},
	{"docs/performance-and-cost.md", "| **total** | | **${{CostPer1000Jobs per-1k-jobs.USD n.3}}** |"},
	{"docs/performance-and-cost.md", "{{CostPer1000Jobs per-month.sweeps n}} sweeps a month of the idle pools " +
		"({{CostPer1000Jobs idle-sweep-ms n}} ms each: {{CostPer1000Jobs per-month.lambda-GB-s n}} GB-s, " +
		"{{CostPer1000Jobs per-month.dynamodb-RRU n}} RRU, {{CostPer1000Jobs per-month.dynamodb-WRU n}} WRU — " +
		"{{CostPer1000Jobs idle-sweep-WRU word}} writes a sweep"},
	{"docs/performance-and-cost.md", "— {{CostPer1000Jobs per-month.log-KiB MiB}} MiB of logs), " +
		"about ${{CostPer1000Jobs per-month.USD n.2}} a month"},
	{"docs/faq.md", "About ${{CostPer1000Jobs per-1k-jobs.USD n.2}} per 1,000 jobs in AWS, " +
		"plus about ${{CostPer1000Jobs per-month.USD n.2}} a month"},
}
