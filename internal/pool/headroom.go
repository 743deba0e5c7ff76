package pool

import "fmt"

// DefaultHeadroomImage is the placeholder pods' image when headroom.image is
// not set: the Kubernetes pause image, which does nothing until it is stopped.
const DefaultHeadroomImage = "registry.k8s.io/pause:3.10"

// Headroom keeps placeholder pods of the runner's size on the pool's nodes, at a
// priority below every runner's, so a new runner pod takes a placeholder's place
// on a node that is already up instead of waiting for a node to be added.
type Headroom struct {
	// Replicas is how many placeholders the pool keeps outside the scheduled
	// overrides (0 to at most maxReplicas).
	Replicas int `yaml:"replicas"`
	// Image is the placeholders' image (default registry.k8s.io/pause:3.10); it
	// must run as a non-root user and do nothing.
	//
	// DefaultHeadroomImage.
	Image string `yaml:"image"`
	// ScheduledOverrides replace replicas in their windows; the first active one wins.
	ScheduledOverrides []HeadroomOverride `yaml:"scheduledOverrides"`
}

// HeadroomOverride replaces headroom.replicas between startTime and endTime,
// optionally recurring, as a scheduled override of the pool replaces minReplicas.
type HeadroomOverride struct {
	StartTime      Time            `yaml:"startTime"`
	EndTime        Time            `yaml:"endTime"`
	RecurrenceRule *RecurrenceRule `yaml:"recurrenceRule"`
	Replicas       *int            `yaml:"replicas"`
}

// Window is the override as a ScheduledOverride whose MinReplicas is the
// headroom's replicas, so that both kinds of override are evaluated alike.
func (o HeadroomOverride) Window() ScheduledOverride {
	return ScheduledOverride{StartTime: o.StartTime, EndTime: o.EndTime, RecurrenceRule: o.RecurrenceRule, MinReplicas: o.Replicas}
}

// HeadroomImage is headroom.image, or DefaultHeadroomImage.
func (h *Headroom) HeadroomImage() string {
	if h == nil || h.Image == "" {
		return DefaultHeadroomImage
	}
	return h.Image
}

func (p *Pool) validateHeadroom() error {
	h := p.Headroom
	if h == nil || p.MaxReplicas == nil { // no maxReplicas: reported by validateReplicas
		return nil
	}
	if h.Replicas < 0 || h.Replicas > p.Max() {
		return fmt.Errorf("headroom.replicas: %d must be between 0 and maxReplicas (%d)", h.Replicas, p.Max())
	}
	windows := make([]ScheduledOverride, len(h.ScheduledOverrides))
	for i, o := range h.ScheduledOverrides {
		windows[i] = o.Window()
	}
	return validateWindows("headroom.scheduledOverrides", "replicas", windows, p.Max())
}
