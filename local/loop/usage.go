package loop

import (
	"net/http"
	"sync"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

// Usage is what the loop's two functions did, as Lambda would bill it: the
// invocations and their durations (each rounded up to the millisecond, as Lambda
// does). Here they run in-process on this machine, so a duration is this
// machine's, and includes what an invocation waits for (DynamoDB, Kubernetes,
// GitHub, a runner's container to exit) as Lambda's does.
type Usage struct {
	Webhook Invocations
	// Nudged are the sweeper's invocations by the webhook's nudges; Scheduled
	// those of its schedule.
	Nudged, Scheduled Invocations
}

// Invocations counts one kind of invocation.
type Invocations struct {
	Count    int
	Duration time.Duration
}

func (i *Invocations) add(d time.Duration) {
	i.Count++
	i.Duration += (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// usageMeter records Usage; its zero value is ready.
type usageMeter struct {
	mu sync.Mutex
	u  Usage
}

// webhook counts each request h serves as one webhook invocation.
func (m *usageMeter) webhook(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		m.record(&m.u.Webhook, time.Since(start))
	})
}

// sweep records a sweeper invocation of ev that started at start.
func (m *usageMeter) sweep(ev sweeper.Event, start time.Time) {
	if ev.Pool != "" {
		m.record(&m.u.Nudged, time.Since(start))
	} else {
		m.record(&m.u.Scheduled, time.Since(start))
	}
}

func (m *usageMeter) record(i *Invocations, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i.add(d)
}

// Usage returns what the loop's functions did so far.
func (l *Loop) Usage() Usage {
	l.usage.mu.Lock()
	defer l.usage.mu.Unlock()
	return l.usage.u
}
