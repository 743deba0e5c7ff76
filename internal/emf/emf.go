// Package emf writes CloudWatch Embedded Metric Format records: one JSON object a
// line on the function's stdout, from which CloudWatch Logs extracts the metrics
// (namespace Namespace).
//
// Lambda's log-level filtering (the template's LogLevel, ApplicationLogLevel of a
// JSON-format function) reads each line's "level" and treats a line without one as
// INFO: at WARN or ERROR it would drop untagged metric lines with the INFO logs.
// So every record carries the function's own application log level (Lambda sets
// AWS_LAMBDA_LOG_LEVEL to it; the mains pass it to NewWriter): a line at exactly
// the configured level always passes, and a metric line claims ERROR only where
// the operator asked for errors only. Records also carry message "metrics", so a
// log query can leave them out.
package emf

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Namespace is the CloudWatch namespace of every metric the product emits.
const Namespace = "runnerscaler"

// Message is the "message" of every metric line.
const Message = "metrics"

// Unit is a CloudWatch metric unit.
type Unit string

// The units used here.
const (
	Count        Unit = "Count"
	Seconds      Unit = "Seconds"
	Milliseconds Unit = "Milliseconds"
	None         Unit = "None"
)

// Metric is one value of a record, or several (Values, when not nil: samples
// of one sweep, such as each runner's registration time).
type Metric struct {
	Name   string
	Unit   Unit
	Value  float64
	Values []float64
}

// Record is one EMF document: metric values under one set of dimensions, at one time.
type Record struct {
	Time time.Time
	// Dimensions name the series (e.g. Pool: linux); their keys form the one
	// dimension set of the record. Empty: the metrics have no dimension.
	Dimensions map[string]string
	// Rollup also publishes the metrics without dimensions, as one series of
	// every value under any dimension values: an alarm can then watch a
	// percentile of them all, which a Metrics Insights query over a dimension
	// cannot compute.
	Rollup  bool
	Metrics []Metric
}

// Levels are Lambda's application log levels, least severe first.
var Levels = []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}

// Writer writes records as lines to an io.Writer, safe for concurrent use.
type Writer struct {
	mu    sync.Mutex
	out   io.Writer
	level string
}

// NewWriter writes to out (a function's stdout) with records at logLevel: the
// function's AWS_LAMBDA_LOG_LEVEL. An empty value (no log-level filtering) means
// INFO; an unknown one is an error naming it.
func NewWriter(out io.Writer, logLevel string) (*Writer, error) {
	level := strings.ToUpper(strings.TrimSpace(logLevel))
	if level == "" {
		level = "INFO"
	}
	if !slices.Contains(Levels, level) {
		return nil, fmt.Errorf("log level %q is not one of Lambda's (%s)", logLevel, strings.Join(Levels, ", "))
	}
	return &Writer{out: out, level: level}, nil
}

// Level is the "level" every line carries.
func (w *Writer) Level() string { return w.level }

// Write encodes r as one line. A record without metrics writes nothing.
func (w *Writer) Write(r Record) error {
	if w == nil || len(r.Metrics) == 0 {
		return nil
	}
	line, err := encode(r, w.level)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.out.Write(line); err != nil {
		return fmt.Errorf("writing metrics: %w", err)
	}
	return nil
}

func encode(r Record, level string) ([]byte, error) {
	doc := map[string]any{"level": level, "message": Message, "timestamp": r.Time.UTC().Format(time.RFC3339Nano)}
	defs := make([]map[string]string, 0, len(r.Metrics))
	for _, m := range r.Metrics {
		if _, clash := doc[m.Name]; clash || m.Name == "_aws" || r.Dimensions[m.Name] != "" {
			return nil, fmt.Errorf("metric name %q clashes with another field of the record", m.Name)
		}
		doc[m.Name] = m.Value
		if m.Values != nil {
			doc[m.Name] = m.Values
		}
		defs = append(defs, map[string]string{"Name": m.Name, "Unit": string(m.Unit)})
	}
	dims := slices.Sorted(maps.Keys(r.Dimensions))
	for _, d := range dims {
		doc[d] = r.Dimensions[d]
	}
	sets := [][]string{dims}
	if r.Rollup && len(dims) > 0 {
		sets = append(sets, []string{})
	}
	doc["_aws"] = map[string]any{
		"Timestamp": r.Time.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace": Namespace, "Dimensions": sets, "Metrics": defs,
		}},
	}
	line, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding metrics: %w", err)
	}
	return append(line, '\n'), nil
}
