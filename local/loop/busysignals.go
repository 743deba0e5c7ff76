package loop

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// GitHub's lying busy flag (docs/concepts.md cites its report), in GitHub's time: REST says
// busy: false for 25–60 s after a job's assignment, and at short moments
// mid-job (here: once a minute, for 5 s).
const (
	gitHubMinLag       = 25 * time.Second
	gitHubMaxLag       = 60 * time.Second
	gitHubFlickerEvery = time.Minute
	gitHubFlickerFor   = 5 * time.Second
)

// ScaledBusyLie is GitHub's lying busy flag in the loop's time: the loop runs
// the sweeper every sweepEvery where AWS runs it every minute, and its jobs
// last seconds where real ones last minutes, so every duration of the lie is
// scaled by sweepEvery / 1 minute (sweepEvery 1 s: a lag of 0.42–1 s, and
// busy: false for 83 ms once a second mid-job). seed makes the draws reproducible.
func ScaledBusyLie(sweepEvery time.Duration, seed uint64) *githubsim.BusyLie {
	scale := func(d time.Duration) time.Duration {
		return time.Duration(float64(d) * float64(sweepEvery) / float64(time.Minute))
	}
	return &githubsim.BusyLie{MinLag: scale(gitHubMinLag), MaxLag: scale(gitHubMaxLag),
		FlickerEvery: scale(gitHubFlickerEvery), FlickerFor: scale(gitHubFlickerFor), Seed: seed}
}

// ScaledIdleConfirmation is the reconciler's default idle confirmation
// (reconcile.DefaultIdleConfirmation, 90 s: longer than GitHub's 60 s lag) in
// the loop's time, scaled as ScaledBusyLie (sweepEvery 1 s: 1.5 s).
func ScaledIdleConfirmation(sweepEvery time.Duration) time.Duration {
	return time.Duration(float64(reconcile.DefaultIdleConfirmation) * float64(sweepEvery) / float64(time.Minute))
}

// ScaledRunnerListMaxAge is the sweeper's default runner-list sharing
// (sweeper.DefaultRunnerListMaxAge, 10 s) in the loop's time, scaled as
// ScaledIdleConfirmation (sweepEvery 1 s: 167 ms).
func ScaledRunnerListMaxAge(sweepEvery time.Duration) time.Duration {
	return time.Duration(float64(sweeper.DefaultRunnerListMaxAge) * float64(sweepEvery) / float64(time.Minute))
}

// busySignalField reports whether an EMF field is one of the sweeper's counts
// of how it decided a runner was busy: the removals each signal vetoed
// (RemovalsVetoedBy...) and the disagreements between signals.
func busySignalField(name string) bool {
	return strings.HasPrefix(name, "RemovalsVetoedBy") || name == "BusySignalDisagreements"
}

// metricSums is the io.Writer under the sweeper's EMF writer: it sums, over the
// run, every numeric busy-signal field of the records (busySignalField); other
// fields are ignored. Lines may arrive split over several writes.
type metricSums struct {
	mu      sync.Mutex
	partial []byte
	sums    map[string]float64
	bad     int // lines that were not JSON objects
	// windows: every RemovalCheckWindow value (ms): from the last busy signal
	// read to the RemoveRunner call.
	windows []float64
}

func newMetricSums() *metricSums { return &metricSums{sums: map[string]float64{}} }

func (m *metricSums) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.partial = append(m.partial, p...)
	for {
		i := bytes.IndexByte(m.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		m.add(m.partial[:i])
		m.partial = m.partial[i+1:]
	}
}

// add sums one record's busy-signal fields; the caller holds mu.
func (m *metricSums) add(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	var rec map[string]any
	if err := json.Unmarshal(line, &rec); err != nil {
		m.bad++
		return
	}
	for k, v := range rec {
		if n, ok := v.(float64); ok && busySignalField(k) {
			m.sums[k] += n
		}
	}
	if vs, ok := rec["RemovalCheckWindow"].([]any); ok {
		for _, v := range vs {
			if n, ok := v.(float64); ok {
				m.windows = append(m.windows, n)
			}
		}
	}
}

func (m *metricSums) snapshot() map[string]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.sums)
}

// BusySignalMetrics sums, over the run so far, each busy-signal field of the
// sweeper's per-pool metric records: RemovalsVetoedBy... (how many runner
// removals each signal vetoed) and BusySignalDisagreements. A field the
// sweeper never wrote is absent.
func (l *Loop) BusySignalMetrics() map[string]float64 { return l.metrics.snapshot() }

// RemovalCheckWindows returns, over the run so far, every time (in ms) from the
// sweeper's last read of a busy signal to its RemoveRunner call, sorted.
func (l *Loop) RemovalCheckWindows() []float64 {
	l.metrics.mu.Lock()
	defer l.metrics.mu.Unlock()
	out := slices.Clone(l.metrics.windows)
	slices.Sort(out)
	return out
}

// ScaledHeldGrace is sweeper.DefaultHeldGrace in the loop's time, scaled as
// ScaledRunnerListMaxAge: a job held that long is asked about on GitHub.
func ScaledHeldGrace(sweepEvery time.Duration) time.Duration {
	return time.Duration(float64(sweeper.DefaultHeldGrace) * float64(sweepEvery) / float64(time.Minute))
}
