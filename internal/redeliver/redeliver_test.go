package redeliver_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestRecoverRedeliversWhatNeverGotThrough: the webhook is down for some
// deliveries; Recover asks GitHub (the simulator) to redeliver exactly those, and
// a second run finds nothing left.
func TestRecoverRedeliversWhatNeverGotThrough(t *testing.T) {
	t.Parallel()
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	sim := githubsim.New(githubsim.Options{AppID: 5, AppKey: &key.PublicKey})
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
		_ = json.Unmarshal(payload, &p)
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
	n, err := r.Recover(t.Context())
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
	if n, err := r.Recover(t.Context()); err != nil || n != 0 {
		t.Fatalf("second Recover = %d, %v; want nothing left", n, err)
	}
}
