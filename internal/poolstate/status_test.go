package poolstate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestStatusOptimisticConcurrency(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	s := poolstate.NewStore(db, name)
	st, err := s.Get(t.Context(), "p")
	if err != nil || st.Version != 0 || st.Desired != 0 {
		t.Fatalf("unswept pool: %+v, %v", st, err)
	}
	st.Desired, st.LastScaleOut, st.Phases, st.Reason = 3, t0, map[string]int{"running": 2}, "scale out 0 -> 3"
	written, err := s.Put(t.Context(), st)
	if err != nil || written.Version != 1 {
		t.Fatalf("first put: %+v, %v", written, err)
	}
	// A writer that read version 0 loses.
	if _, err := s.Put(t.Context(), st); !errors.Is(err, poolstate.ErrConflict) {
		t.Fatalf("stale put: %v, want ErrConflict", err)
	}
	got, err := s.Get(t.Context(), "p")
	if err != nil || got.Desired != 3 || !got.LastScaleOut.Equal(t0) || got.Phases["running"] != 2 || got.Version != 1 {
		t.Fatalf("read back %+v, %v", got, err)
	}
	got.Desired = 1
	if w, err := s.Put(t.Context(), got); err != nil || w.Version != 2 {
		t.Fatalf("second put: %+v, %v", w, err)
	}
	if _, err := s.Put(t.Context(), written); !errors.Is(err, poolstate.ErrConflict) {
		t.Fatalf("put at version 1 after version 2: %v, want ErrConflict", err)
	}
}
