package poolstate_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/poolstate"
)

func TestRecordOutcomeKeepsTheLatestErrors(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var st poolstate.Status
	for i := range poolstate.MaxErrors + 2 {
		st.RecordOutcome(at.Add(time.Duration(i)*time.Minute), fmt.Errorf("failure %d", i))
	}
	if !st.Failed || len(st.Errors) != poolstate.MaxErrors || st.Errors[0].Error != "failure 2" ||
		st.Errors[poolstate.MaxErrors-1].Error != fmt.Sprintf("failure %d", poolstate.MaxErrors+1) {
		t.Fatalf("after %d failures: failed %v, errors %+v", poolstate.MaxErrors+2, st.Failed, st.Errors)
	}
	st.RecordOutcome(at.Add(time.Hour), nil)
	if st.Failed || len(st.Errors) != poolstate.MaxErrors {
		t.Fatalf("after a success: failed %v, %d errors kept; want not failed, history kept", st.Failed, len(st.Errors))
	}
	st.RecordOutcome(at, errors.New(strings.Repeat("é", 400)))
	if last := st.Errors[len(st.Errors)-1].Error; len(last) > 510 || !strings.HasSuffix(last, "…") {
		t.Fatalf("a long error kept as %d bytes", len(last))
	}
}
