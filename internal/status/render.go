package status

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// JSON writes v (a Report, Pool or Trace) as indented JSON, for scripts.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encoding status: %w", err)
	}
	return nil
}

// table is a tabwriter with the first write error kept.
type table struct {
	tw  *tabwriter.Writer
	err error
}

func newTable(w io.Writer) *table { return &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)} }

// row prints one row; each cell is made printable first.
func (t *table) row(cells ...string) {
	if t.err == nil {
		clean := make([]string, len(cells))
		for i, c := range cells {
			clean[i] = printable(c)
		}
		_, t.err = fmt.Fprintln(t.tw, strings.Join(clean, "\t"))
	}
}

// line prints a formatted line; its string arguments are made printable first.
func (t *table) line(format string, args ...any) {
	if t.err == nil {
		clean := make([]any, len(args))
		for i, a := range args {
			if s, ok := a.(string); ok {
				a = printable(s)
			}
			clean[i] = a
		}
		_, t.err = fmt.Fprintf(t.tw, format+"\n", clean...)
	}
}

// printable makes s safe to print on a terminal: names, labels and errors come
// from webhook payloads, GitHub and the cluster, and a control character in them
// (an ESC sequence, a C1 control, DEL) or an invisible one (a bidi override, a
// zero-width space) could rewrite what the operator sees. Whitespace becomes a
// space; every other character that is not printable, and every byte that is not
// UTF-8, is dropped.
func printable(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], string(utf8.RuneError)):
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case unicode.IsSpace(r):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

func (t *table) flush() error {
	if t.err != nil {
		return fmt.Errorf("writing status: %w", t.err)
	}
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}

// RenderReport prints whether GitHub gets its deliveries through to the
// webhook, every pool in one table, then the waiting jobs with why, the runners
// held up, the unrouted jobs and the recent errors.
func RenderReport(w io.Writer, r Report) error {
	if err := RenderWebhook(w, r.Webhook); err != nil {
		return err
	}
	t := newTable(w)
	t.row("POOL", "DESIRED", "RUNNING", "PENDING", "STOPPING", "QUEUED", "OLDEST", "WAIT 1H P50/P95", "MAX", "SATURATED",
		"APPROVAL", "LAST SWEEP")
	for _, p := range r.Pools {
		t.row(p.Name, itoa(p.Desired), itoa(p.Running), itoa(p.Pending), itoa(p.Stopping), itoa(len(p.Queued)),
			oldest(p.Queued), waitCell(p.QueueWait), itoa(p.MaxReplicas), yes(p.Saturated), approvalCell(p.WaitingForApproval),
			sweepCell(r.At, p.LastSweep))
	}
	if err := t.flush(); err != nil {
		return err
	}
	section(t, w, "RUNNER VERSIONS", versionHeader, versionRows(r.Pools))
	var queued, held [][]string
	for _, p := range r.Pools {
		for _, j := range p.Queued {
			queued = append(queued, []string{p.Name, i64(j.ID), j.Repository, secs(j.AgeSeconds), oneLine(j.Waiting)})
		}
		for _, rn := range p.Runners {
			if rn.Reason != "" && (rn.Phase == PhasePending || rn.Phase == PhaseStopping || rn.Phase == PhaseTerminating) {
				held = append(held, []string{p.Name, rn.Name, oneLine(rn.Reason)})
			}
		}
	}
	section(t, w, "QUEUED JOBS", []string{"POOL", "JOB", "REPOSITORY", "AGE", "WHY IT WAITS"}, queued)
	section(t, w, "WAITING FOR APPROVAL", []string{"POOL", "JOB", "REPOSITORY", "HELD FOR"}, approvalRows(r.Pools))
	section(t, w, "RUNNERS HELD UP", []string{"POOL", "RUNNER", "REASON"}, held)
	section(t, w, "JOBS COUNTED IN ANOTHER POOL", []string{"POOL", "DIRECTION", "JOB", "WHAT"}, moveRows(r.Pools))
	var unrouted, errs [][]string
	for _, j := range r.Unrouted {
		unrouted = append(unrouted, []string{i64(j.ID), j.Repository, j.State, secs(j.AgeSeconds), oneLine(j.Waiting)})
	}
	section(t, w, "JOBS NO POOL MATCHED", []string{"JOB", "REPOSITORY", "STATE", "AGE", "WHY"}, unrouted)
	for _, p := range r.Pools {
		for _, e := range recentErrors(p.LastSweep) {
			errs = append(errs, []string{p.Name, ago(r.At, e.At), oneLine(e.Error)})
		}
	}
	section(t, w, "RECENT SWEEP ERRORS", []string{"POOL", "WHEN", "ERROR"}, errs)
	return t.err
}

// RenderWebhook prints what the last delivery check says of the webhook's
// deliveries: one line, then a line per further hint, then a blank line.
func RenderWebhook(w io.Writer, h Webhook) error {
	var lines []string
	window := short(time.Duration(h.WindowSeconds * float64(time.Second)))
	prefix := "webhook: "
	if h.Stale {
		prefix = fmt.Sprintf("webhook (stale: checked %s ago; each scheduled sweep checks — see the sweeper's log): ",
			secs(h.AgeSeconds))
	}
	switch h.State {
	case WebhookNotChecked:
		lines = append(lines, prefix+"deliveries not checked yet (each scheduled sweep reads GitHub's delivery log when the deployment has a GitHub App)")
	case WebhookOK:
		lines = append(lines, fmt.Sprintf("%sno failed workflow_job deliveries in the last %s (checked %s)", prefix, window, clockTime(h.CheckedAt)))
	default:
		line := fmt.Sprintf("%s%d workflow_job deliveries GitHub could not get through in the last %s (%s)",
			prefix, h.Failed, window, statusCounts(h.ByStatus))
		if h.Redelivered > 0 {
			line += fmt.Sprintf("; the last check redelivered %d", h.Redelivered)
		}
		rest := h.Hints // the latest's first
		if l := h.Latest; l != nil {
			line += fmt.Sprintf("; latest %s %s, %s", clockTime(l.At), l.Action, statusText(l.StatusCode))
			if len(rest) > 0 && slices.Contains(rest[0].Statuses, l.StatusCode) {
				line += " — " + rest[0].Hint
				rest = rest[1:]
			}
		}
		lines = append(lines, line)
		for _, hint := range rest {
			codes := make([]string, len(hint.Statuses))
			for i, c := range hint.Statuses {
				codes[i] = statusText(c)
			}
			lines = append(lines, fmt.Sprintf("  %s: %s", strings.Join(codes, ", "), hint.Hint))
		}
	}
	for i, l := range lines {
		lines[i] = printable(l) // the latest delivery's action is GitHub's
	}
	_, err := fmt.Fprintln(w, strings.Join(lines, "\n")+"\n")
	if err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}

// statusCounts lists status codes with their counts, most frequent first.
func statusCounts(byStatus map[int]int) string {
	codes := slices.Collect(maps.Keys(byStatus))
	slices.SortFunc(codes, func(a, b int) int {
		if byStatus[a] != byStatus[b] {
			return byStatus[b] - byStatus[a]
		}
		return a - b
	})
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s ×%d", statusText(c), byStatus[c])
	}
	return strings.Join(parts, ", ")
}

func statusText(code int) string {
	if code == 0 {
		return "no response"
	}
	return strconv.Itoa(code)
}

// clockTime is t's time of day in UTC.
func clockTime(t time.Time) string { return t.UTC().Format("15:04:05") + " UTC" }

// section prints a titled table when it has rows.
func section(t *table, w io.Writer, title string, header []string, rows [][]string) {
	if len(rows) == 0 || t.err != nil {
		return
	}
	st := newTable(w)
	st.line("\n%s", title)
	st.row(header...)
	for _, r := range rows {
		st.row(r...)
	}
	t.err = st.flush()
}

// RenderPool prints one pool: its counts and last sweep, its runners (phase,
// GitHub id, busy), its queued jobs with why, and its recent errors.
func RenderPool(w io.Writer, at time.Time, p Pool) error {
	t := newTable(w)
	t.line("pool %s: desired %d (min %d, max %d), running %d, pending %d, stopping %d, saturated %s",
		p.Name, p.Desired, p.MinReplicas, p.MaxReplicas, p.Running, p.Pending, p.Stopping, yes(p.Saturated))
	t.line("last sweep: %s", sweepCell(at, p.LastSweep))
	t.line("queue wait: %s", waitLine(p.QueueWait))
	if p.RunnerVersion != nil {
		t.line("runner version: %s", versionLine(p.RunnerVersion))
	}
	t.line("waiting for approval: %s", approvalCell(p.WaitingForApproval))
	if p.LastSweep != nil && p.LastSweep.Reason != "" {
		t.line("decision: %s", p.LastSweep.Reason)
	}
	if p.LastSweep != nil && p.LastSweep.Deferred != "" {
		t.line("deferred: %s", p.LastSweep.Deferred)
	}
	if p.LastSweep != nil {
		for _, f := range p.LastSweep.Foreign {
			t.line("foreign object, left alone: %s", oneLine(f))
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	var runners, queued, progress, errs [][]string
	for _, rn := range p.Runners {
		runners = append(runners, []string{rn.Name, rn.Phase, idCell(rn.GitHubID), yes(rn.Busy), idCell(rn.Job),
			ago(at, rn.Created), oneLine(runnerNote(rn))})
	}
	for _, j := range p.Queued {
		queued = append(queued, []string{i64(j.ID), j.Repository, secs(j.AgeSeconds), oneLine(j.Waiting)})
	}
	for _, j := range p.InProgress {
		progress = append(progress, []string{i64(j.ID), j.Repository, secs(j.AgeSeconds), j.RunnerName})
	}
	for _, e := range recentErrors(p.LastSweep) {
		errs = append(errs, []string{ago(at, e.At), oneLine(e.Error)})
	}
	section(t, w, "RUNNERS", []string{"NAME", "PHASE", "GITHUB ID", "BUSY", "JOB", "AGE", "REASON"}, runners)
	section(t, w, "QUEUED JOBS", []string{"JOB", "REPOSITORY", "AGE", "WHY IT WAITS"}, queued)
	section(t, w, "WAITING FOR APPROVAL", []string{"POOL", "JOB", "REPOSITORY", "HELD FOR"}, approvalRows([]Pool{p}))
	section(t, w, "JOBS IN PROGRESS", []string{"JOB", "REPOSITORY", "AGE", "RUNNER"}, progress)
	section(t, w, "JOBS COUNTED IN ANOTHER POOL", []string{"POOL", "DIRECTION", "JOB", "WHAT"}, moveRows([]Pool{p}))
	section(t, w, "RECENT SWEEP ERRORS", []string{"WHEN", "ERROR"}, errs)
	return t.err
}

// RenderTrace prints one job: pool, state, reservation, runner, deliveries.
func RenderTrace(w io.Writer, at time.Time, tr Trace) error {
	j := tr.Job
	t := newTable(w)
	t.row("job", i64(j.ID))
	t.row("pool", orDash(j.Pool))
	t.row("repository", j.Repository)
	t.row("state", j.State)
	t.row("first seen", fmt.Sprintf("%s (%s ago)", j.FirstSeen.Format(time.RFC3339), short(at.Sub(j.FirstSeen))))
	t.row("reservation", reservationCell(at, tr))
	if j.Waiting != "" {
		t.row("why it waits", j.Waiting)
	}
	t.row("runner", runnerCell(tr))
	if tr.Rerun != nil {
		t.row("re-run", rerunCell(tr.Rerun))
	}
	if err := t.flush(); err != nil {
		return err
	}
	var rows [][]string
	for _, d := range j.Deliveries {
		at := "-"
		if !d.At.IsZero() {
			at = d.At.Format(time.RFC3339Nano)
		}
		rows = append(rows, []string{d.State, d.ID, at})
	}
	section(t, w, "DELIVERIES", []string{"STATE", "DELIVERY", "RECORDED"}, rows)
	return t.err
}

func reservationCell(at time.Time, tr Trace) string {
	j := tr.Job
	switch {
	case j.Pool == "":
		return "none: no pool matched, nothing is reserved"
	case j.State == "completed":
		return "released (job completed)"
	case !j.HeldSince.IsZero():
		return fmt.Sprintf("none: waiting for its environment's approval since %s (%s); the approval's queued reserves a runner",
			j.HeldSince.Format(time.RFC3339), short(at.Sub(j.HeldSince)))
	case tr.Active:
		return fmt.Sprintf("holds %d runner(s), expires in %s (extended %d times)", j.Amount, short(j.Expires.Sub(at)), j.Extensions)
	}
	return fmt.Sprintf("expired %s ago: no longer counted", short(at.Sub(j.Expires)))
}

func runnerCell(tr Trace) string {
	j := tr.Job
	switch {
	case j.RunnerName == "":
		return "none took it yet"
	case tr.Runner != nil:
		return fmt.Sprintf("%s (GitHub id %d), StatefulSet %s, %s", j.RunnerName, j.RunnerID, tr.Runner.StatefulSet, tr.Runner.Phase)
	}
	return fmt.Sprintf("%s (GitHub id %d), gone from the cluster", j.RunnerName, j.RunnerID)
}

func sweepCell(at time.Time, s *Sweep) string {
	if s == nil {
		return "never"
	}
	outcome := "ok"
	if s.Failed {
		outcome = "failed"
	}
	return fmt.Sprintf("%s ago, %s", short(at.Sub(s.At)), outcome)
}

func recentErrors(s *Sweep) []SweepError {
	if s == nil {
		return nil
	}
	return s.Errors
}

// waitCell is the pools table's p50/p95 of the recent queue waits, with how
// many jobs they are of.
func waitCell(q QueueWait) string {
	if q.Jobs == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s (%d jobs)", secs(q.P50Seconds), secs(q.P95Seconds), q.Jobs)
}

// waitLine is the pool view's line of the recent queue waits.
func waitLine(q QueueWait) string {
	window := "hour"
	if d := time.Duration(q.WindowSeconds * float64(time.Second)); d != time.Hour {
		window = short(d)
	}
	if q.Jobs == 0 {
		return "no job started in the last " + window
	}
	return fmt.Sprintf("p50 %s, p95 %s over the %d jobs started in the last %s (created → started)",
		secs(q.P50Seconds), secs(q.P95Seconds), q.Jobs, window)
}

func oldest(queued []Job) string {
	if len(queued) == 0 {
		return "-"
	}
	return secs(queued[0].AgeSeconds)
}

func secs(s float64) string { return short(time.Duration(s * float64(time.Second))) }

func ago(at, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return short(at.Sub(t))
}

func idCell(id int64) string {
	if id == 0 {
		return "-"
	}
	return i64(id)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func itoa(n int) string  { return strconv.Itoa(n) }
func i64(n int64) string { return strconv.FormatInt(n, 10) }

// runnerNote is a runner's last column: why it is held up, and its workflow
// pod (container mode).
func runnerNote(rn Runner) string {
	switch {
	case rn.WorkflowPod == "":
		return rn.Reason
	case rn.Reason == "":
		return "workflow pod " + rn.WorkflowPod
	}
	return rn.Reason + "; workflow pod " + rn.WorkflowPod
}
