package arcimport

import (
	"fmt"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// autoscaler carries an HRA's replicas, scale-down delay, trigger and
// scheduled overrides into dr, and drops what has no counterpart (metrics,
// triggers on other events).
func (c *converter) autoscaler(h *object, dr *draft) {
	spec := get(h.node, "spec")
	c.unknown(h, "", h.node, objectFields)
	c.unknown(h, "spec", spec, hraFields)
	dr.min = arcDefaultMin
	if n := c.intField(h, "spec.minReplicas", get(spec, "minReplicas")); n != nil && *n >= 0 {
		dr.min = *n
	}
	dr.max = c.intField(h, "spec.maxReplicas", get(spec, "maxReplicas"))
	dr.delay = c.intField(h, "spec.scaleDownDelaySecondsAfterScaleOut", get(spec, "scaleDownDelaySecondsAfterScaleOut"))
	if trig := get(spec, "scaleUpTriggers"); trig != nil {
		for i, t := range trig.Content {
			c.trigger(h, dr, fmt.Sprintf("spec.scaleUpTriggers[%d]", i), t)
		}
	}
	for i, m := range contentOf(get(spec, "metrics")) {
		c.drop(h, fmt.Sprintf("spec.metrics[%d]", i),
			fmt.Sprintf("metric %s: runnerscaler does not poll GitHub for metrics", scalar(get(m, "type"))),
			"scaling follows workflow_job deliveries (each queued job reserves a runner); keep idle capacity with minReplicas or scheduledOverrides")
	}
	for i, o := range contentOf(get(spec, "scheduledOverrides")) {
		c.override(h, dr, fmt.Sprintf("spec.scheduledOverrides[%d]", i), o)
	}
	c.ceiling(h, dr)
}

func contentOf(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// trigger carries the first workflow_job (or check_run) trigger's amount and
// duration: ARC v0.22 writes a workflow_job trigger as `githubEvent: {}`,
// later versions as `githubEvent: {workflowJob: {}}`.
func (c *converter) trigger(h *object, dr *draft, p string, t *yaml.Node) {
	c.unknown(h, p, t, triggerFields)
	ev := get(t, "githubEvent")
	if ev == nil {
		c.drop(h, p, "a trigger without githubEvent never fires in ARC", "leave it out")
		return
	}
	c.unknown(h, p+".githubEvent", ev, eventFields)
	carried := true
	pairs(ev, func(k string, _ *yaml.Node) {
		switch k {
		case "checkRun":
			c.drop(h, p+".githubEvent.checkRun", "runnerscaler scales on workflow_job deliveries, not check_run",
				"subscribe the GitHub App to Workflow job: each queued job reserves `amount` runners for `duration` (both carried)")
		case "pullRequest", "push":
			carried = false
			c.drop(h, p+".githubEvent."+k, fmt.Sprintf("runnerscaler scales on workflow_job deliveries, not %s: one event is not one job", k),
				"each queued job reserves one runner for 10m by default; set scaleUpTriggers in the pool to change that")
		}
	})
	if !carried {
		return
	}
	if dr.trigger != nil {
		c.drop(h, p, "runnerscaler takes one trigger per pool", "the first trigger's amount and duration apply")
		return
	}
	dr.trigger = &omap{}
	if a := c.intField(h, p+".amount", get(t, "amount")); a != nil {
		if *a < 1 {
			c.drop(h, p+".amount", fmt.Sprintf("%d: a job reserves at least one runner", *a), "imported as the default, 1")
		} else {
			dr.trigger.set("amount", num(*a))
		}
	}
	c.duration(h, dr, p+".duration", get(t, "duration"))
}

func (c *converter) duration(h *object, dr *draft, p string, v *yaml.Node) {
	s := scalar(v)
	if s == "" {
		return
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		c.drop(h, p, fmt.Sprintf("%q is not a duration", s), "imported as the default, 10m")
	case d < time.Minute:
		c.drop(h, p, fmt.Sprintf("%s: runnerscaler's reservations last at least 1m", s), "imported as 1m")
		dr.trigger.set("duration", str("1m"))
	default:
		dr.trigger.set("duration", str(s))
	}
}

// override carries a scheduled override when the pools file can take it.
func (c *converter) override(h *object, dr *draft, p string, o *yaml.Node) {
	c.unknown(h, p, o, overrideFields)
	c.unknown(h, p+".recurrenceRule", get(o, "recurrenceRule"), recurrenceFields)
	var ov pool.ScheduledOverride
	raw, err := yaml.Marshal(clean(o))
	if err == nil {
		err = yaml.Unmarshal(raw, &ov)
	}
	switch {
	case err != nil:
		c.drop(h, p, fmt.Sprintf("not a scheduled override runnerscaler can read: %v", err),
			"write startTime and endTime as RFC 3339 times, minReplicas as a number")
	case ov.StartTime.IsZero() || ov.EndTime.IsZero() || !ov.EndTime.After(ov.StartTime.Time):
		c.drop(h, p, "startTime and endTime are required, endTime after startTime", "fix the window")
	case ov.MinReplicas == nil || *ov.MinReplicas < 0:
		c.drop(h, p+".minReplicas", "required, at least 0", "set it")
	case ov.RecurrenceRule != nil && !slices.Contains(pool.Frequencies, ov.RecurrenceRule.Frequency):
		c.drop(h, p+".recurrenceRule.frequency", fmt.Sprintf("%q is not one of %v", ov.RecurrenceRule.Frequency, pool.Frequencies), "use one of them")
	default:
		dr.overrides = append(dr.overrides, clean(o))
		dr.overrideMins = append(dr.overrideMins, *ov.MinReplicas)
		dr.overridePaths = append(dr.overridePaths, p)
	}
}

// ceiling: runnerscaler requires maxReplicas, ARC does not; an override or
// minReplicas above it is not carried.
func (c *converter) ceiling(h *object, dr *draft) {
	if dr.max == nil {
		m := max(dr.min, 1)
		for _, o := range dr.overrideMins {
			m = max(m, o)
		}
		dr.max = &m
		c.drop(h, "spec.maxReplicas", "not set: ARC has no ceiling, runnerscaler requires one",
			fmt.Sprintf("set maxReplicas to your real ceiling: imported as %d (the highest minReplicas)", m))
	}
	if *dr.max < 1 {
		one := 1
		c.drop(h, "spec.maxReplicas", fmt.Sprintf("%d: a pool needs a ceiling of at least 1", *dr.max), "imported as 1")
		dr.max = &one
	}
	if dr.min > *dr.max {
		c.drop(h, "spec.minReplicas", fmt.Sprintf("%d is over maxReplicas %d", dr.min, *dr.max), fmt.Sprintf("imported as %d", *dr.max))
		dr.min = *dr.max
	}
	var kept []*yaml.Node
	for i, o := range dr.overrides {
		if dr.overrideMins[i] > *dr.max {
			c.drop(h, dr.overridePaths[i]+".minReplicas",
				fmt.Sprintf("minReplicas %d is over maxReplicas %d", dr.overrideMins[i], *dr.max), "raise maxReplicas or lower the override")
			continue
		}
		kept = append(kept, o)
	}
	dr.overrides = kept
}
