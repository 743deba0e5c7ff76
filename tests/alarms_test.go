package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/runnerversion"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
)

// TestAlarms: the alarms watch what the README says, and notify the topic.
func TestAlarms(t *testing.T) {
	t.Parallel()
	tmpl := openTemplate(t)
	alarms := tmpl.GetAllCloudWatchAlarmResources()
	for name, a := range alarms {
		if !slices.Equal(a.AlarmActions, []string{"REF:AlarmTopic"}) {
			t.Errorf("%s notifies %v, want the AlarmTopic", name, a.AlarmActions)
		}
	}
	queued, err := tmpl.GetCloudWatchAlarmWithName("OldestQueuedAgeAlarm")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`SELECT MAX(OldestQueuedAge) FROM SCHEMA("%s", Pool)`, emf.Namespace)
	if len(queued.Metrics) != 1 || queued.Metrics[0].Expression == nil || *queued.Metrics[0].Expression != want {
		t.Errorf("OldestQueuedAgeAlarm queries %+v, want %s", queued.Metrics, want)
	}
	if def, _ := numberDefault(rawTemplate(t), "QueuedAgeAlarmSeconds"); queued.Threshold == nil || def == nil ||
		fmt.Sprint(*queued.Threshold) != fmt.Sprint(def) || queued.ComparisonOperator != "GreaterThanThreshold" {
		t.Errorf("OldestQueuedAgeAlarm threshold %v %s, want > the QueuedAgeAlarmSeconds parameter (%v)", queued.Threshold, queued.ComparisonOperator, def)
	}
	slow, err := tmpl.GetCloudWatchAlarmWithName("QueueWaitP95Alarm")
	if err != nil {
		t.Fatal(err)
	}
	// The webhook's metric, in the series without dimensions that holds every pool's waits.
	if slow.Namespace == nil || *slow.Namespace != emf.Namespace || slow.MetricName == nil || *slow.MetricName != webhook.QueueWaitMetric ||
		len(slow.Dimensions) != 0 || slow.ExtendedStatistic == nil || *slow.ExtendedStatistic != "p95" || slow.Statistic != nil {
		t.Errorf("QueueWaitP95Alarm watches %v %v %+v at %v/%v, want %s %s without dimensions at p95",
			slow.Namespace, slow.MetricName, slow.Dimensions, slow.ExtendedStatistic, slow.Statistic, emf.Namespace, webhook.QueueWaitMetric)
	}
	if def, _ := numberDefault(rawTemplate(t), "QueueWaitP95Seconds"); slow.Threshold == nil || def == nil || fmt.Sprint(def) != "120" ||
		fmt.Sprint(*slow.Threshold) != fmt.Sprint(def) || slow.ComparisonOperator != "GreaterThanThreshold" {
		t.Errorf("QueueWaitP95Alarm threshold %v %s, want > the QueueWaitP95Seconds parameter (%v, default 120)", slow.Threshold, slow.ComparisonOperator, def)
	}
	if slow.Period == nil || *slow.Period != 300 || slow.EvaluationPeriods != 2 || slow.DatapointsToAlarm == nil || *slow.DatapointsToAlarm != 2 ||
		slow.TreatMissingData == nil || *slow.TreatMissingData != "notBreaching" {
		t.Errorf("QueueWaitP95Alarm evaluates %v s × %d (%v to alarm), missing data %v; want 300 s, 2 of 2, not breaching",
			slow.Period, slow.EvaluationPeriods, slow.DatapointsToAlarm, slow.TreatMissingData)
	}
	forbidden, err := tmpl.GetCloudWatchAlarmWithName("RemovalsForbiddenAlarm")
	if err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf(`SELECT SUM(RemovalsForbidden) FROM SCHEMA("%s", Pool)`, emf.Namespace)
	if len(forbidden.Metrics) != 1 || forbidden.Metrics[0].Expression == nil || *forbidden.Metrics[0].Expression != want ||
		forbidden.Threshold == nil || *forbidden.Threshold != 0 || forbidden.ComparisonOperator != "GreaterThanThreshold" {
		t.Errorf("RemovalsForbiddenAlarm %+v, want %s > 0", forbidden.Metrics, want)
	}
	refused, err := tmpl.GetCloudWatchAlarmWithName("RerunsRefusedAlarm")
	if err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf(`SELECT SUM(RerunsRefused) FROM SCHEMA("%s", Pool)`, emf.Namespace)
	if len(refused.Metrics) != 1 || refused.Metrics[0].Expression == nil || *refused.Metrics[0].Expression != want ||
		refused.Threshold == nil || *refused.Threshold != 0 || refused.ComparisonOperator != "GreaterThanThreshold" {
		t.Errorf("RerunsRefusedAlarm %+v, want %s > 0", refused.Metrics, want)
	}
	version, err := tmpl.GetCloudWatchAlarmWithName("RunnerVersionAlarm")
	if err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf(`SELECT MIN(%s) FROM SCHEMA("%s", Pool)`, runnerversion.DaysLeftMetric, emf.Namespace)
	if len(version.Metrics) != 1 || version.Metrics[0].Expression == nil || *version.Metrics[0].Expression != want {
		t.Errorf("RunnerVersionAlarm queries %+v, want %s", version.Metrics, want)
	}
	if def, _ := numberDefault(rawTemplate(t), "RunnerVersionDaysLeftAlarm"); version.Threshold == nil || def == nil || fmt.Sprint(def) != "7" ||
		fmt.Sprint(*version.Threshold) != fmt.Sprint(def) || version.ComparisonOperator != "LessThanThreshold" {
		t.Errorf("RunnerVersionAlarm threshold %v %s, want < the RunnerVersionDaysLeftAlarm parameter (%v, default 7)", version.Threshold, version.ComparisonOperator, def)
	}
	if version.TreatMissingData == nil || *version.TreatMissingData != "notBreaching" {
		t.Errorf("RunnerVersionAlarm treats missing data as %v, want notBreaching (no metric before the first check)", version.TreatMissingData)
	}
	for name, w := range map[string]struct{ namespace, metric, dimension, value string }{
		"SweeperErrorsAlarm": {"AWS/Lambda", "Errors", "FunctionName", "REF:SweeperFunction"},
		"Webhook5xxAlarm":    {"AWS/ApiGateway", "5xx", "ApiId", "REF:WebhookApi"},
	} {
		a, err := tmpl.GetCloudWatchAlarmWithName(name)
		if err != nil {
			t.Fatal(err)
		}
		if a.Namespace == nil || *a.Namespace != w.namespace || a.MetricName == nil || *a.MetricName != w.metric ||
			len(a.Dimensions) != 1 || a.Dimensions[0].Name != w.dimension || a.Dimensions[0].Value != w.value {
			t.Errorf("%s watches %v %v %+v, want %s %s %s=%s", name, a.Namespace, a.MetricName, a.Dimensions,
				w.namespace, w.metric, w.dimension, w.value)
		}
	}
}

// TestDashboard: the dashboard is valid JSON, shows every alarm and every metric
// the functions emit.
func TestDashboard(t *testing.T) {
	t.Parallel()
	d, err := openTemplate(t).GetCloudWatchDashboardWithName("Dashboard")
	if err != nil {
		t.Fatal(err)
	}
	body, ok := strings.CutPrefix(d.DashboardBody, "SUB:")
	if !ok {
		t.Fatalf("dashboard body is not a !Sub: %.80s", d.DashboardBody)
	}
	// The substitutions outside a JSON string are the alarm thresholds, numbers.
	body = strings.ReplaceAll(body, "${QueuedAgeAlarmSeconds}", "900")
	body = strings.ReplaceAll(body, "${QueueWaitP95Seconds}", "120")
	body = strings.ReplaceAll(body, "${RunnerVersionDaysLeftAlarm}", "7")
	var doc struct {
		Widgets []struct {
			Type       string          `json:"type"`
			Properties json.RawMessage `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("dashboard body is not JSON: %v", err)
	}
	all := body
	for _, name := range []string{"${OldestQueuedAgeAlarm.Arn}", "${QueueWaitP95Alarm.Arn}", "${SweeperErrorsAlarm.Arn}", "${Webhook5xxAlarm.Arn}", "${RemovalsForbiddenAlarm.Arn}",
		"${RerunsRefusedAlarm.Arn}", "${RunnerVersionAlarm.Arn}"} {
		if !strings.Contains(all, name) {
			t.Errorf("dashboard does not show alarm %s", name)
		}
	}
	for _, metric := range []string{"QueuedJobs", "OldestQueuedAge", "Saturated", "Held", "Extended", "PendingWithReason",
		"RunnerRegistrationTime", "Desired", "Running", "Pending", "Deliveries", "NudgeFailures", "Redeliveries", "GitHubRateRemaining",
		"RemovalsVetoedByGitHub", "RemovalsVetoedByPodReport", "RemovalsVetoedByJobLink", "RemovalsVetoedByIdleWindow",
		"BusySignalDisagreements", "RemovalsForbidden", "RemovalCheckWindow", webhook.QueueWaitMetric,
		"RunnerDeaths", "JobsRerun", "FailedJobsNotRerun", "RerunsRefused", "RerunDelay", runnerversion.DaysLeftMetric} {
		if !strings.Contains(all, `MetricName=\"`+metric+`\"`) && !strings.Contains(all, `"runnerscaler", "`+metric+`"`) {
			t.Errorf("dashboard does not show metric %s", metric)
		}
	}
	if len(doc.Widgets) < 8 {
		t.Errorf("%d widgets", len(doc.Widgets))
	}
}

// TestMetricLinesSurviveTheTemplatesLogLevels: for each LogLevel the template
// admits, a metric line written as the functions write it (at the level Lambda
// sets in AWS_LAMBDA_LOG_LEVEL) passes Lambda's filter — at ERROR too.
func TestMetricLinesSurviveTheTemplatesLogLevels(t *testing.T) {
	t.Parallel()
	var doc struct {
		Parameters struct {
			LogLevel struct {
				AllowedValues []string `yaml:"AllowedValues"`
			} `yaml:"LogLevel"`
		} `yaml:"Parameters"`
	}
	raw, err := os.ReadFile("../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	levels := doc.Parameters.LogLevel.AllowedValues
	if !slices.Contains(levels, "ERROR") {
		t.Fatalf("LogLevel allows %v", levels)
	}
	for _, level := range levels {
		var out bytes.Buffer
		w, err := emf.NewWriter(&out, level)
		if err != nil {
			t.Fatalf("LogLevel %s: %v", level, err)
		}
		if err := w.Write(emf.Record{Dimensions: map[string]string{"Pool": "p"}, Metrics: []emf.Metric{{Name: "QueuedJobs", Value: 1}}}); err != nil {
			t.Fatal(err)
		}
		var line struct{ Level string }
		if err := json.Unmarshal(out.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		// Lambda keeps a line whose level is at or above the configured one.
		if slices.Index(emf.Levels, line.Level) < slices.Index(emf.Levels, level) {
			t.Errorf("at LogLevel %s the metric line has level %q: Lambda drops it", level, line.Level)
		}
	}
}
