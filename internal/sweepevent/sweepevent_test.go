package sweepevent_test

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
)

// TestShippedEventsDecode: the events under local/events — an EventBridge
// scheduled event as AWS sends it, a nudge and the drain commands — decode into
// the fields the sweeper dispatches on, so the JSON names and the drain
// constants match what callers send.
func TestShippedEventsDecode(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]sweepevent.Event{
		"sweeper-scheduled.json":    {Source: "aws.events", DetailType: "Scheduled Event"},
		"sweeper-nudge.json":        {Pool: "octo"},
		"sweeper-drain.json":        {Drain: sweepevent.DrainStart},
		"sweeper-drain-cancel.json": {Drain: sweepevent.DrainCancel},
	} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile("../../local/events/" + file)
			if err != nil {
				t.Fatal(err)
			}
			var got sweepevent.Event
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s decodes to %+v, want %+v", file, got, want)
			}
		})
	}
}

// TestNudgeRoundTrips: a nudge keeps its jobs and finished runners through
// JSON, and carries no empty scheduled-event or drain fields.
func TestNudgeRoundTrips(t *testing.T) {
	t.Parallel()
	ev := sweepevent.Event{Pool: "octo", Jobs: []int64{7}, Finished: []string{"octo-bcdfg-0"}}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"pool":"octo","jobs":[7],"finished":["octo-bcdfg-0"]}`; string(raw) != want {
		t.Fatalf("encoded %s, want %s", raw, want)
	}
	var back sweepevent.Event
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ev) {
		t.Fatalf("round trip %+v, want %+v", back, ev)
	}
}
