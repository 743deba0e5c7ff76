package redeliver_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestRecoverRedeliversWhatNeverGotThrough: the webhook is down for some
// deliveries; Recover asks GitHub (the simulator) to redeliver exactly those, and
// a second run finds nothing left.
func TestRecoverRedeliversWhatNeverGotThrough(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	sim := githubsim.New(githubsim.Options{AppID: 5, AppKey: &key.PublicKey})
	apispec.Verify(t, sim)
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()

	var mu sync.Mutex
	received := map[int64][]string{} // job id → actions the webhook accepted
	down := true
	sim.OnDelivery(func(_, _ string, payload []byte) int {
		var p struct {
			Action string `json:"action"`
			Job    struct {
				ID int64 `json:"id"`
			} `json:"workflow_job"`
		}
		if err := json.Unmarshal(payload, &p); err != nil {
			t.Errorf("delivery payload: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if down && p.Job.ID%2 == 0 {
			return 503 // even jobs' deliveries fail while the webhook is "down"
		}
		received[p.Job.ID] = append(received[p.Job.ID], p.Action)
		return 200
	})
	for range 6 {
		sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"x"}, Duration: time.Second})
	}
	mu.Lock()
	down = false
	mu.Unlock()

	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	app, err := githubapi.NewApp(githubapi.Config{BaseURL: srv.URL, Auth: githubapi.Auth{AppID: 5, PrivateKey: keyPEM}})
	if err != nil {
		t.Fatal(err)
	}
	r := redeliver.New(app, clock.RealClock{}, 0, nil)
	n, err := redelivered(t.Context(), r)
	if err != nil || n != 3 {
		t.Fatalf("Recover = %d, %v; want the 3 failed deliveries", n, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := len(received)
		mu.Unlock()
		if got == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook received %d of 6 jobs after redelivery", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	for id, actions := range received {
		if len(actions) != 1 {
			t.Errorf("job %d delivered %v, want exactly once", id, actions)
		}
	}
	mu.Unlock()
	if n, err := redelivered(t.Context(), r); err != nil || n != 0 {
		t.Fatalf("second Recover = %d, %v; want nothing left", n, err)
	}
}

// redelivered is how many redeliveries r.Recover asked for.
func redelivered(ctx context.Context, r *redeliver.Recoverer) (int, error) {
	u, err := r.Recover(ctx)
	return u.Redelivered, err
}

// failing is a GitHub simulator whose webhook answers every delivery with status
// (0: no answer), and an App client of it.
type failing struct {
	sim *githubsim.Server
	app *githubapi.AppClient
	mu  sync.Mutex
	got []int64 // job ids of the deliveries, in order
}

// newFailing starts the simulator on clk. Its App JWTs carry the real time, so
// clk must be within a minute of it whenever the App calls the simulator.
func newFailing(t *testing.T, clk clock.PassiveClock, status int) *failing {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f := &failing{sim: githubsim.New(githubsim.Options{AppID: 5, AppKey: &key.PublicKey, Clock: clk})}
	apispec.Verify(t, f.sim)
	srv := httptest.NewServer(f.sim.Handler())
	t.Cleanup(srv.Close)
	f.sim.OnDelivery(func(_, _ string, payload []byte) int {
		var p struct {
			Job struct {
				ID int64 `json:"id"`
			} `json:"workflow_job"`
		}
		if err := json.Unmarshal(payload, &p); err != nil {
			t.Errorf("delivery payload: %v", err)
		}
		f.mu.Lock()
		f.got = append(f.got, p.Job.ID)
		f.mu.Unlock()
		return status
	})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	app, err := githubapi.NewApp(githubapi.Config{BaseURL: srv.URL, Auth: githubapi.Auth{AppID: 5, PrivateKey: keyPEM}})
	if err != nil {
		t.Fatal(err)
	}
	f.app = app
	return f
}

func (f *failing) queue() int64 {
	return f.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"x"}, Duration: time.Second}).ID
}

// waitAttempts waits until the delivery log holds n attempts (a redelivery is
// attempted after GitHub accepted the request) and returns them, newest first.
func (f *failing) waitAttempts(t *testing.T, n int) []githubapi.HookDelivery {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		all, err := f.app.Deliveries(t.Context(), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) >= n {
			return all
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery log holds %d attempts, want %d", len(all), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRedeliversOnlyWhatCanSucceed: a delivery refused with a 4xx other than 408
// or 429 (a rotated secret's 401, a rejected payload's 400, ...) is never
// redelivered; one that got no answer or a 5xx is.
func TestRedeliversOnlyWhatCanSucceed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		want   int
	}{
		{400, 0}, {401, 0}, {403, 0}, {404, 0}, {413, 0}, {422, 0},
		{0, 1}, {408, 1}, {429, 1}, {500, 1}, {502, 1}, {503, 1}, {504, 1},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			t.Parallel()
			clk := clocktesting.NewFakeClock(time.Now())
			f := newFailing(t, clk, tc.status)
			f.queue()
			r := redeliver.New(f.app, clk, 0, nil)
			for i := 1; i <= 2; i++ {
				if n, err := redelivered(t.Context(), r); err != nil || n != tc.want {
					t.Fatalf("Recover #%d after a %d = %d, %v; want %d", i, tc.status, n, err, tc.want)
				}
				f.waitAttempts(t, 1+i*tc.want)
				clk.Step(11 * time.Second) // past the settling time of a redelivery
			}
		})
	}
}

// TestRedeliveryEndsAtTheCap: a delivery that keeps failing with a 502 is
// redelivered MaxRedeliveries times, then no more.
func TestRedeliveryEndsAtTheCap(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now().Add(-time.Minute))
	f := newFailing(t, clk, 502)
	f.queue()
	r := redeliver.New(f.app, clk, 0, nil)
	for i := 1; i <= redeliver.MaxRedeliveries; i++ {
		if n, err := redelivered(t.Context(), r); err != nil || n != 1 {
			t.Fatalf("Recover #%d = %d, %v; want the 502 redelivered", i, n, err)
		}
		f.waitAttempts(t, 1+i)
		clk.Step(11 * time.Second)
	}
	if n, err := redelivered(t.Context(), r); err != nil || n != 0 {
		t.Fatalf("Recover after %d redeliveries = %d, %v; want none", redeliver.MaxRedeliveries, n, err)
	}
}

// TestWindowRunsFromTheOriginalDelivery: a delivery first attempted 40 minutes
// ago is not redelivered, though someone redelivered it a moment ago; one first
// attempted 20 minutes ago is.
func TestWindowRunsFromTheOriginalDelivery(t *testing.T) {
	t.Parallel()
	now := time.Now()
	clk := clocktesting.NewFakeClock(now.Add(-40 * time.Minute))
	f := newFailing(t, clk, 503)
	old := f.queue()
	clk.SetTime(now.Add(-20 * time.Minute))
	recent := f.queue()
	clk.SetTime(now)
	originals := f.waitAttempts(t, 2)
	for _, d := range originals { // as a user clicking "Redeliver" would
		if err := f.app.Redeliver(t.Context(), d.ID); err != nil {
			t.Fatal(err)
		}
	}
	f.waitAttempts(t, 4)
	clk.Step(11 * time.Second)
	f.mu.Lock()
	f.got = nil
	f.mu.Unlock()
	n, err := redelivered(t.Context(), redeliver.New(f.app, clk, 0, nil))
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want 1 (the delivery first attempted 20 minutes ago)", n, err)
	}
	f.waitAttempts(t, 5)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.got) != 1 || f.got[0] != recent {
		t.Fatalf("redelivered jobs %v, want only %d (not %d, first attempted 40 minutes ago)", f.got, recent, old)
	}
}

// recordingApp notes the ids Recover asks to redeliver, in order.
type recordingApp struct {
	redeliver.App
	ids []int64
}

func (a *recordingApp) Redeliver(ctx context.Context, id int64) error {
	a.ids = append(a.ids, id)
	return a.App.Redeliver(ctx, id)
}

// TestRedeliversOldestFirst: a job's queued is asked for before a later delivery.
func TestRedeliversOldestFirst(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	f := newFailing(t, clk, 503)
	for range 4 {
		f.queue()
		clk.Step(time.Second)
	}
	app := &recordingApp{App: f.app}
	if n, err := redelivered(t.Context(), redeliver.New(app, clk, 0, nil)); err != nil || n != 4 {
		t.Fatalf("Recover = %d, %v; want 4", n, err)
	}
	if !slices.IsSorted(app.ids) || len(app.ids) != 4 {
		t.Fatalf("redelivered ids %v, want the 4 oldest first", app.ids)
	}
}
