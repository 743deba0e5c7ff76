package webhook_test

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

const benchDeliveries = 10_000

// BenchmarkDeliveries sends 10,000 signed workflow_job deliveries (job life cycles:
// every job queued, 60% also in_progress, 30% also completed) through the handler
// against dynalite, at concurrency 1 and 32, and reports latency p50/p99 and
// deliveries per second. Afterwards the active reservations must be exactly the
// jobs that did not complete.
func BenchmarkDeliveries(b *testing.B) {
	for _, conc := range []int{1, 32} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			reqs, wantActive := buildDeliveries(b)
			for b.Loop() {
				h, store := benchHandler(b)
				lat, elapsed := deliverAll(b, h, reqs, conc)
				rs, err := store.Active(b.Context(), "octo")
				if err != nil {
					b.Fatal(err)
				}
				if len(rs) != wantActive {
					b.Fatalf("active reservations %d after %d deliveries, want exactly %d", len(rs), len(reqs), wantActive)
				}
				slices.Sort(lat)
				b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
				b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
				b.ReportMetric(float64(len(reqs))/elapsed.Seconds(), "deliveries/s")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func benchHandler(b *testing.B) (*webhook.Handler, *reservation.Store) {
	cfg, err := pool.Parse([]byte(pools))
	if err != nil {
		b.Fatal(err)
	}
	db, name := testenv.Table(b)
	store := reservation.New(db, name, clocktesting.NewFakePassiveClock(fixtureTime))
	log := slog.New(slog.NewJSONHandler(io.Discard, nil)) // formatting cost included, as in Lambda
	return webhook.New([]byte(secret), cfg, store, webhook.WithLogger(log)), store
}

func buildDeliveries(b *testing.B) ([]events.APIGatewayV2HTTPRequest, int) {
	queued := string(fixture(b, "workflow_job/queued.payload.json"))
	var reqs []events.APIGatewayV2HTTPRequest
	active := 0
	for job := 1; len(reqs) < benchDeliveries; job++ {
		states := []string{"queued"}
		switch {
		case job%10 < 3:
			states = append(states, "in_progress", "completed")
		case job%10 < 6:
			states = append(states, "in_progress")
			active++
		default:
			active++
		}
		for _, st := range states {
			body := strings.Replace(queued, `"id": 289782451`, fmt.Sprintf(`"id": %d`, job), 1)
			body = strings.Replace(body, `"action": "queued"`, `"action": "`+st+`"`, 1)
			reqs = append(reqs, events.APIGatewayV2HTTPRequest{Headers: lower(headersFor("workflow_job", []byte(body))), Body: body})
		}
	}
	return reqs, active
}

func deliverAll(b *testing.B, h *webhook.Handler, reqs []events.APIGatewayV2HTTPRequest, conc int) ([]time.Duration, time.Duration) {
	lat := make([]time.Duration, len(reqs))
	next := make(chan int)
	var wg sync.WaitGroup
	var failed sync.Once
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for i := range next {
				t := time.Now()
				resp, err := h.Handle(b.Context(), reqs[i])
				lat[i] = time.Since(t)
				if err != nil || resp.StatusCode != 200 {
					failed.Do(func() { b.Errorf("delivery %d: %d %s %v", i, resp.StatusCode, resp.Body, err) })
				}
			}
		})
	}
	// Each job's deliveries are in life-cycle order in reqs; with concurrency they
	// may overtake each other, which the forward-only store must absorb.
	for i := range reqs {
		next <- i
	}
	close(next)
	wg.Wait()
	return lat, time.Since(start)
}
