package emf_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/emf"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// LambdaKeeps is Lambda's log-level filter as documented ("Log-level filtering",
// Lambda developer guide): a JSON line's "level" decides, and a line whose level
// is missing or invalid counts as INFO; lines below the configured level are
// dropped.
func LambdaKeeps(t *testing.T, line []byte, configured string) bool {
	t.Helper()
	var doc struct {
		Level string `json:"level"`
	}
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatalf("line is not JSON: %s", line)
	}
	rank := slices.Index(emf.Levels, strings.ToUpper(doc.Level))
	if rank < 0 {
		rank = slices.Index(emf.Levels, "INFO")
	}
	return rank >= slices.Index(emf.Levels, configured)
}

func TestLinesSurviveEveryLogLevel(t *testing.T) {
	t.Parallel()
	for _, level := range emf.Levels {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			w, err := emf.NewWriter(&buf, level)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(emf.Record{Time: t0, Dimensions: map[string]string{"Pool": "p"},
				Metrics: []emf.Metric{{Name: "QueuedJobs", Unit: emf.Count, Value: 3}}}); err != nil {
				t.Fatal(err)
			}
			if !LambdaKeeps(t, buf.Bytes(), level) {
				t.Fatalf("Lambda at %s drops the metric line %s", level, buf.Bytes())
			}
		})
	}
	// The filter model has teeth: an untagged line, as metric lines used to be, is
	// dropped at ERROR.
	if LambdaKeeps(t, []byte(`{"Pool":"p","_aws":{}}`), "ERROR") {
		t.Fatal("the model keeps an untagged line at ERROR")
	}
}

func TestRecordIsEMF(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w, err := emf.NewWriter(&buf, "")
	if err != nil {
		t.Fatal(err)
	}
	err = w.Write(emf.Record{Time: t0, Dimensions: map[string]string{"Pool": "linux"}, Metrics: []emf.Metric{
		{Name: "QueuedJobs", Unit: emf.Count, Value: 3}, {Name: "OldestQueuedAge", Unit: emf.Seconds, Value: 42.5}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != 1 {
		t.Fatalf("%d lines, want 1", n)
	}
	var doc struct {
		Level, Message, Pool string
		QueuedJobs           float64
		OldestQueuedAge      float64
		AWS                  struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Level != "INFO" || doc.Message != emf.Message || doc.Pool != "linux" || doc.QueuedJobs != 3 || doc.OldestQueuedAge != 42.5 {
		t.Fatalf("record %+v", doc)
	}
	cw := doc.AWS.CloudWatchMetrics
	if doc.AWS.Timestamp != t0.UnixMilli() || len(cw) != 1 || cw[0].Namespace != emf.Namespace ||
		len(cw[0].Dimensions) != 1 || !slices.Equal(cw[0].Dimensions[0], []string{"Pool"}) || len(cw[0].Metrics) != 2 ||
		cw[0].Metrics[1].Name != "OldestQueuedAge" || cw[0].Metrics[1].Unit != "Seconds" {
		t.Fatalf("metadata %+v", doc.AWS)
	}
}

// TestRollupAddsTheSeriesWithoutDimensions: a rollup record names two
// dimension sets, its own and the empty one; a record without Rollup only its own.
func TestRollupAddsTheSeriesWithoutDimensions(t *testing.T) {
	t.Parallel()
	for _, rollup := range []bool{true, false} {
		var buf bytes.Buffer
		w, err := emf.NewWriter(&buf, "")
		if err != nil {
			t.Fatal(err)
		}
		err = w.Write(emf.Record{Time: t0, Dimensions: map[string]string{"Pool": "linux"}, Rollup: rollup,
			Metrics: []emf.Metric{{Name: "QueueWaitSeconds", Unit: emf.Seconds, Value: 7}}})
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			AWS struct {
				CloudWatchMetrics []struct{ Dimensions [][]string }
			} `json:"_aws"`
		}
		if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		want := [][]string{{"Pool"}}
		if rollup {
			want = append(want, []string{})
		}
		cw := doc.AWS.CloudWatchMetrics
		if len(cw) != 1 || !slices.EqualFunc(cw[0].Dimensions, want, slices.Equal) {
			t.Fatalf("Rollup %v: dimension sets %+v, want %v", rollup, cw, want)
		}
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	if _, err := emf.NewWriter(&bytes.Buffer{}, "verbose"); err == nil || !strings.Contains(err.Error(), `"verbose"`) {
		t.Fatalf("NewWriter(verbose) = %v, want an error naming the level", err)
	}
	w, err := emf.NewWriter(&bytes.Buffer{}, "INFO")
	if err != nil {
		t.Fatal(err)
	}
	err = w.Write(emf.Record{Time: t0, Dimensions: map[string]string{"Pool": "p"}, Metrics: []emf.Metric{{Name: "Pool", Value: 1}}})
	if err == nil {
		t.Fatal("a metric named like a dimension was accepted")
	}
}
