package pool

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Defaults, as in ARC v0.22 where ARC has one.
const (
	// DefaultTriggerDuration is how long a reservation lives without news (ARC's default for webhook scaling).
	DefaultTriggerDuration = 10 * time.Minute
	// DefaultScaleDownDelay is ARC's scaleDownDelaySecondsAfterScaleOut default.
	DefaultScaleDownDelay = 600 * time.Second
	// DefaultRerunsPerRun is how many re-runs a workflow run gets when a job of
	// it dies with its runner, unless the pool says otherwise.
	DefaultRerunsPerRun = 1
	// MaxRerunsPerRun is GitHub's limit of re-runs of a workflow run.
	MaxRerunsPerRun = 50
	// RegistrationJIT: each runner gets a just-in-time config, one GitHub
	// request (generate-jitconfig) per runner. Ephemeral pools only.
	RegistrationJIT = "jit"
	// RegistrationToken: runners register with config.sh and the scope's
	// registration token, one GitHub request per scope an hour.
	RegistrationToken = "token"
	// MaxNameLength keeps `<name>-xxxxx-0` and the controller-revision-hash label within 63 characters.
	MaxNameLength = 40
)

// Config is a pools file.
type Config struct {
	Pools []Pool `yaml:"pools"`

	byRepo, byOrg, byEnterprise map[string][]*Pool
}

// Pool is one runner pool: where its runners register, which jobs they take, how
// many may exist, and the pod they run in.
type Pool struct {
	Name         string   `yaml:"name"`
	Enterprise   string   `yaml:"enterprise"`
	Organization string   `yaml:"organization"`
	Repository   string   `yaml:"repository"`
	Group        string   `yaml:"group"`
	Labels       []string `yaml:"labels"`
	// Arch is the runner's architecture label (x64, arm64 or arm; default x64),
	// implied like `self-hosted` and `linux`: the runner agent adds these itself.
	Arch      string `yaml:"arch"`
	Ephemeral *bool  `yaml:"ephemeral"`
	// Registration is how the pool's runners register: "jit" (the default for
	// ephemeral pools: one just-in-time config per runner) or "token" (one
	// registration token per scope; required for persistent pools).
	//
	// RegistrationJIT, RegistrationToken; see UsesToken.
	Registration string `yaml:"registration"`
	// AllowJobsToReadRegistrationToken accepts that the pool's jobs can read its
	// registration token, which registers runners of any name and labels in the
	// pool's scope for up to an hour — runners that are then handed other
	// repositories' jobs and their secrets. A pool that uses the token
	// (persistent, or registration: token) needs it together with docker, a
	// template that sets a user, a service account token, privilege escalation or
	// hostPID; a pool with JIT configs may not set it.
	//
	// The pool's settings are checked in tokenexposure.go, the template's by
	// package runnerpod (TokenReadable).
	AllowJobsToReadRegistrationToken bool `yaml:"allowJobsToReadRegistrationToken"`
	MinReplicas                      int  `yaml:"minReplicas"`
	// MaxReplicas is required: an autoscaler with no ceiling is a bill with no ceiling.
	MaxReplicas                        *int                `yaml:"maxReplicas"`
	ScaleUpTriggers                    []ScaleUpTrigger    `yaml:"scaleUpTriggers"`
	ScaleDownDelaySecondsAfterScaleOut *int                `yaml:"scaleDownDelaySecondsAfterScaleOut"`
	ScheduledOverrides                 []ScheduledOverride `yaml:"scheduledOverrides"`
	// RerunsPerRun is how many times a workflow run may be re-run because a
	// job of it died with its runner (default 1; 0: never; at most 50).
	//
	// DefaultRerunsPerRun.
	RerunsPerRun *int       `yaml:"rerunsPerRun"`
	Kubernetes   Kubernetes `yaml:"kubernetes"`
	// Headroom, when set, keeps placeholder pods for the pool's next runners.
	Headroom *Headroom `yaml:"headroom"`
	// RunnerVersion is the actions/runner version the pool's image runs
	// (default: the version runner/Dockerfile installs), for the alarm before
	// GitHub stops giving it jobs.
	//
	// See runnerversion.go.
	RunnerVersion string `yaml:"runnerVersion"`
	// OverflowTo, when set, names the pool that serves the pool's queued jobs
	// while it is saturated.
	//
	// See overflow.go.
	OverflowTo string `yaml:"overflowTo"`
}

// ScaleUpTrigger says how much capacity one queued job reserves and for how long.
type ScaleUpTrigger struct {
	Amount   *int     `yaml:"amount"`
	Duration Duration `yaml:"duration"`
}

// ScheduledOverride replaces minReplicas between startTime and endTime, optionally recurring.
type ScheduledOverride struct {
	StartTime      Time            `yaml:"startTime"`
	EndTime        Time            `yaml:"endTime"`
	RecurrenceRule *RecurrenceRule `yaml:"recurrenceRule"`
	MinReplicas    *int            `yaml:"minReplicas"`
}

// RecurrenceRule repeats an override's window every frequency until untilTime (if set).
type RecurrenceRule struct {
	Frequency string `yaml:"frequency"`
	UntilTime Time   `yaml:"untilTime"`
}

// Frequencies a RecurrenceRule accepts (ARC's names).
var Frequencies = []string{"Daily", "Weekly", "Monthly", "Yearly"}

// Kubernetes says where and how runner pods run: their namespace, image,
// service account, docker, pod template and volume claim templates.
//
// Template and VolumeClaimTemplates are raw YAML, decoded and validated by the
// sweeper (package runnerpod).
type Kubernetes struct {
	Namespace          string `yaml:"namespace"`
	ServiceAccountName string `yaml:"serviceAccountName"`
	// Image, when set, is the runner container's image (overrides the template's).
	Image string `yaml:"image"`
	// DockerEnabled adds a docker:dind sidecar named `docker` that the runner uses over TCP.
	DockerEnabled bool `yaml:"dockerEnabled"`
	// DockerdWithinRunnerContainer runs dockerd inside the (privileged) runner container instead.
	DockerdWithinRunnerContainer bool      `yaml:"dockerdWithinRunnerContainer"`
	Template                     yaml.Node `yaml:"template"`
	VolumeClaimTemplates         yaml.Node `yaml:"volumeClaimTemplates"`
	// ContainerMode (optional) runs the jobs' containers (`container:`,
	// `services:`, container actions) as workflow pods that
	// actions/runner-container-hooks create through the Kubernetes API, without
	// docker: "kubernetes" (the job's work directory on a per-runner volume,
	// workVolumeClaim, shared with its workflow pod) or "kubernetes-novolume" (no
	// shared volume: the hooks copy the workspace in and out, and workflow pods
	// run in jobsNamespace). ARC's names and meanings. Needs serviceAccountName;
	// not with dockerEnabled or dockerdWithinRunnerContainer.
	//
	// ContainerModeKubernetes, ContainerModeNoVolume; checked in containermode.go.
	ContainerMode string `yaml:"containerMode"`
	// JobsNamespace (kubernetes-novolume only, required) is where the pool's
	// workflow pods run, not the runners' namespace: the runners' service account
	// has the hooks' rights there and nowhere else.
	JobsNamespace string `yaml:"jobsNamespace"`
	// WorkVolumeClaim (kubernetes mode only, required) is the claim spec
	// (storageClassName, accessModes, resources) of each runner's `work` volume,
	// an ephemeral volume that holds the job's work directory and that the
	// runner shares with its workflow pod, as ARC's kubernetesModeWorkVolumeClaim.
	//
	// A PersistentVolumeClaimSpec, decoded by the sweeper (package runnerpod).
	WorkVolumeClaim yaml.Node `yaml:"workVolumeClaim"`
	// RequireJobContainer (container modes; default true, as ARC) fails a job
	// that has no `container:` instead of running its steps in the runner pod.
	RequireJobContainer *bool `yaml:"requireJobContainer"`
	// HookTemplate (container modes, optional) is merged into the workflow pods
	// the hooks create, as ARC's ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE (a pod
	// template; `$job` is the job container): resources, node selectors,
	// tolerations. `runnerscaler validate` warns where a key replaces what the
	// hooks need.
	//
	// A PodTemplateSpec, decoded by the sweeper (package runnerpod).
	HookTemplate yaml.Node `yaml:"hookTemplate"`
}

// Container modes (Kubernetes.ContainerMode).
const (
	ContainerModeKubernetes = "kubernetes"
	ContainerModeNoVolume   = "kubernetes-novolume"
)

// ContainerModes are the values Kubernetes.ContainerMode may take besides "".
var ContainerModes = []string{ContainerModeKubernetes, ContainerModeNoVolume}

// InContainerMode reports whether the pool's jobs run their containers as
// workflow pods.
func (k Kubernetes) InContainerMode() bool { return k.ContainerMode != "" }

// HookNamespace is where the pool's workflow pods run: the jobs namespace in
// kubernetes-novolume mode, the runners' namespace in kubernetes mode (the
// hooks read the runner's pod and mount its claim there), "" outside container
// mode.
func (k Kubernetes) HookNamespace() string {
	switch k.ContainerMode {
	case ContainerModeNoVolume:
		return k.JobsNamespace
	case ContainerModeKubernetes:
		return k.Namespace
	}
	return ""
}

// JobContainerRequired is RequireJobContainer, or its default (true).
func (k Kubernetes) JobContainerRequired() bool {
	return k.RequireJobContainer == nil || *k.RequireJobContainer
}

// Duration is a Go duration string in YAML ("90s", "30m", "1h30m").
type Duration struct{ time.Duration }

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || n.Tag != "!!str" {
		return fmt.Errorf("line %d: %q is not a duration like 30m or 1h30m", n.Line, n.Value)
	}
	d.Duration = v
	return nil
}

// Time is an RFC 3339 timestamp in YAML ("2026-01-05T08:00:00+01:00").
type Time struct{ time.Time }

// UnmarshalYAML parses an RFC 3339 timestamp.
func (t *Time) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.Parse(time.RFC3339, n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not an RFC 3339 time like 2026-01-05T08:00:00+01:00", n.Line, n.Value)
	}
	t.Time = v
	return nil
}

// Load reads and validates the pools file at path.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading pools config: %w", err)
	}
	cfg, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("pools config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes and validates a pools file. The error, if any, joins one
// *Problem for each error found (see Problems): decoding goes on past an
// unknown or badly typed field, and every pool is checked.
func Parse(raw []byte) (*Config, error) {
	cfg, _, problems := ParseAll(raw)
	if len(problems) > 0 {
		errs := make([]error, len(problems))
		for i, p := range problems {
			errs[i] = p
		}
		return nil, errors.Join(errs...)
	}
	cfg.index()
	return cfg, nil
}

// ParseAll decodes and validates raw as far as it goes, for a report of every
// problem at once (runnerscaler validate): the configuration as decoded (nil
// when raw is not YAML or empty; a field that failed to decode is left zero), the
// file's YAML root for positions, and the problems in the order found.
func ParseAll(raw []byte) (*Config, *yaml.Node, []*Problem) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, nil, []*Problem{syntaxProblem(err)}
	}
	if len(doc.Content) == 0 {
		return nil, nil, []*Problem{{Message: "empty file: want a `pools:` list"}}
	}
	root := doc.Content[0]
	cfg := &Config{}
	problems := decodeStrict(root, cfg, "")
	return cfg, root, append(problems, cfg.validate(root, problems)...)
}

// yamlSyntax is yaml.v3's report of a file that is not YAML.
var yamlSyntax = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func syntaxProblem(err error) *Problem {
	m := yamlSyntax.FindStringSubmatch(err.Error())
	if m == nil {
		return &Problem{Message: err.Error()}
	}
	line, _ := strconv.Atoi(m[1])
	return &Problem{Line: line, Column: 1, Where: "yaml", Message: m[2], showLine: true}
}

var (
	dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// Arches are the architectures a pool's arch may name (the runner's label).
	Arches = []string{"x64", "arm64", "arm"}
)

// validate checks every pool (root is the file's YAML) and returns a problem
// for each check that fails, at the field it names. A check about a field that
// already failed to decode (decoded) is not reported twice.
func (c *Config) validate(root *yaml.Node, decoded []*Problem) []*Problem {
	if len(c.Pools) == 0 {
		return []*Problem{{Line: root.Line, Column: root.Column, Where: "pools", Message: "at least one pool is required", path: "pools"}}
	}
	var problems []*Problem
	names := map[string]int{}
	for i := range c.Pools {
		p := &c.Pools[i]
		p.defaults()
		prefix := fmt.Sprintf("pools[%d]", i)
		at, _ := Locate(root, prefix)
		troubled := troubledFields(decoded, prefix)
		errs := p.validate()
		if j, dup := names[p.Name]; dup && p.Name != "" {
			errs = append([]error{fmt.Errorf("name: duplicate of pools[%d]", j)}, errs...)
		} else {
			names[p.Name] = i
		}
		if err := c.validateOverflow(p); err != nil {
			errs = append(errs, err)
		}
		for _, err := range errs {
			field := FieldOf(err)
			if troubled(field) {
				continue
			}
			n, _ := Locate(at, field)
			problems = append(problems, &Problem{Line: n.Line, Column: n.Column, Where: fmt.Sprintf("%s (%s)", prefix, p.Name),
				Message: err.Error(), path: prefix + "." + field})
		}
	}
	return problems
}

// FieldOf is the path of the field a check's error is about: every check's
// error begins with it, relative to the pool (`scheduledOverrides[0].endTime: ...`).
func FieldOf(err error) string {
	field, _, _ := strings.Cut(err.Error(), ": ")
	return field
}

// troubledFields reports whether a field of the pool at prefix (or a field
// under it, or over it) failed to decode, or is what an unknown field of it
// was probably meant to be: a check of such a field says nothing new.
func troubledFields(decoded []*Problem, prefix string) func(field string) bool {
	var paths []string
	for _, p := range decoded {
		rel, ok := strings.CutPrefix(p.Where, prefix+".")
		if !ok {
			continue
		}
		paths = append(paths, rel)
		if p.suggestion != "" {
			parent := ""
			if i := strings.LastIndex(rel, "."); i >= 0 {
				parent = rel[:i+1]
			}
			paths = append(paths, parent+p.suggestion)
		}
	}
	related := func(a, b string) bool {
		return a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(a, b+"[") ||
			strings.HasPrefix(b, a+".") || strings.HasPrefix(b, a+"[")
	}
	return func(field string) bool {
		for _, t := range paths {
			for f := range strings.SplitSeq(field, "/") { // enterprise/organization/repository
				if related(f, t) {
					return true
				}
			}
		}
		return false
	}
}

// defaults gives each field the file may leave out, and that is read as set,
// its value: the arch x64.
func (p *Pool) defaults() {
	if p.Arch == "" {
		p.Arch = "x64"
	}
}

// validate runs the pool's checks; each error begins with the field's path (FieldOf).
func (p *Pool) validate() []error {
	checks := []func() error{p.validateName, p.validateScope, p.validateLabels, p.validateRegistration, p.validateTokenExposure,
		p.validateReplicas, p.validateTriggers, p.validateOverrides, p.validateKubernetes, p.validateContainerMode, p.validateHeadroom,
		p.validateRunnerVersion}
	var errs []error
	for _, check := range checks {
		err := check()
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			errs = append(errs, joined.Unwrap()...) // each element of a list on its own
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func (p *Pool) validateName() error {
	if !dns1123Label.MatchString(p.Name) || len(p.Name) > MaxNameLength {
		return fmt.Errorf("name: %q must be a DNS-1123 label (lower-case letters, digits, '-') of at most %d characters", p.Name, MaxNameLength)
	}
	return nil
}

func (p *Pool) validateScope() error {
	if err := p.Scope().Validate(); err != nil {
		return fmt.Errorf("enterprise/organization/repository: %w", err)
	}
	return nil
}

// validateLabels reports every bad label, each at its index. A label is one
// word of the runner's comma-separated label list: no comma and no space.
// `self-hosted`, which every runner gets (see AllLabels) and a pool cannot do
// without, is refused in labels rather than registered twice: a file that lists
// it reads as if it were optional.
func (p *Pool) validateLabels() error {
	var errs []error
	for i, l := range p.Labels {
		switch {
		case strings.TrimSpace(l) == "" || strings.Contains(l, ","):
			errs = append(errs, fmt.Errorf("labels[%d]: %q must be non-empty and contain no comma", i, l))
		case strings.ContainsFunc(l, unicode.IsSpace):
			errs = append(errs, fmt.Errorf("labels[%d]: %q must contain no space: a label is one word of runs-on", i, l))
		case strings.EqualFold(l, "self-hosted"):
			errs = append(errs, fmt.Errorf("labels[%d]: %q is implied: every runner has self-hosted, linux and its arch (%s); "+
				"leave it out, jobs that ask for it still match", i, l, p.Arch))
		}
	}
	if !slices.Contains(Arches, p.Arch) {
		errs = append(errs, fmt.Errorf("arch: %q must be one of %v", p.Arch, Arches))
	}
	return errors.Join(errs...)
}

func (p *Pool) validateRegistration() error {
	switch {
	case p.Registration != "" && p.Registration != RegistrationJIT && p.Registration != RegistrationToken:
		return fmt.Errorf("registration: %q must be %q or %q", p.Registration, RegistrationJIT, RegistrationToken)
	case p.Registration == RegistrationJIT && !p.IsEphemeral():
		return fmt.Errorf("registration: %q needs ephemeral runners (a JIT config registers a runner for one job); "+
			"persistent pools register with %q", RegistrationJIT, RegistrationToken)
	}
	return nil
}

func (p *Pool) validateReplicas() error {
	if p.MinReplicas < 0 {
		return fmt.Errorf("minReplicas: %d must be >= 0", p.MinReplicas)
	}
	if p.MaxReplicas == nil {
		return errors.New("maxReplicas: required")
	}
	if *p.MaxReplicas < p.MinReplicas || *p.MaxReplicas < 1 {
		return fmt.Errorf("maxReplicas: %d must be >= 1 and >= minReplicas (%d)", *p.MaxReplicas, p.MinReplicas)
	}
	if d := p.ScaleDownDelaySecondsAfterScaleOut; d != nil && *d < 0 {
		return fmt.Errorf("scaleDownDelaySecondsAfterScaleOut: %d must be >= 0", *d)
	}
	if n := p.RerunsPerRun; n != nil && (*n < 0 || *n > MaxRerunsPerRun) {
		return fmt.Errorf("rerunsPerRun: %d must be between 0 (no re-runs) and %d (GitHub's limit)", *n, MaxRerunsPerRun)
	}
	return nil
}

func (p *Pool) validateTriggers() error {
	if len(p.ScaleUpTriggers) > 1 {
		return errors.New("scaleUpTriggers: at most one trigger (the workflow_job trigger) is supported")
	}
	for i, t := range p.ScaleUpTriggers {
		if t.Amount != nil && *t.Amount < 1 {
			return fmt.Errorf("scaleUpTriggers[%d].amount: %d must be >= 1", i, *t.Amount)
		}
		if t.Duration.Duration < 0 || (t.Duration.Duration > 0 && t.Duration.Duration < time.Minute) {
			return fmt.Errorf("scaleUpTriggers[%d].duration: %s must be at least 1m", i, t.Duration.Duration)
		}
	}
	return nil
}

func (p *Pool) validateOverrides() error {
	if p.MaxReplicas == nil {
		return nil // reported by validateReplicas
	}
	return validateWindows("scheduledOverrides", "minReplicas", p.ScheduledOverrides, *p.MaxReplicas)
}

// validateWindows checks scheduled overrides listed under field, whose value
// (named value in the file) must be between 0 and ceiling.
func validateWindows(field, value string, overrides []ScheduledOverride, ceiling int) error {
	for i, o := range overrides {
		field := fmt.Sprintf("%s[%d]", field, i)
		if o.StartTime.IsZero() || o.EndTime.IsZero() {
			return fmt.Errorf("%s: startTime and endTime are required", field)
		}
		if !o.EndTime.After(o.StartTime.Time) {
			return fmt.Errorf("%s.endTime: %s must be after startTime %s", field, o.EndTime.Format(time.RFC3339), o.StartTime.Format(time.RFC3339))
		}
		if o.MinReplicas == nil || *o.MinReplicas < 0 || *o.MinReplicas > ceiling {
			return fmt.Errorf("%s.%s: required, between 0 and maxReplicas (%d)", field, value, ceiling)
		}
		if r := o.RecurrenceRule; r != nil {
			if !slices.Contains(Frequencies, r.Frequency) {
				return fmt.Errorf("%s.recurrenceRule.frequency: %q must be one of %v", field, r.Frequency, Frequencies)
			}
			if !r.UntilTime.IsZero() && r.UntilTime.Before(o.StartTime.Time) {
				return fmt.Errorf("%s.recurrenceRule.untilTime: before startTime", field)
			}
		}
	}
	return nil
}

func (p *Pool) validateKubernetes() error {
	k := p.Kubernetes
	if !dns1123Label.MatchString(k.Namespace) {
		return fmt.Errorf("kubernetes.namespace: %q must be a DNS-1123 label", k.Namespace)
	}
	if k.DockerEnabled && k.DockerdWithinRunnerContainer {
		return errors.New("kubernetes: dockerEnabled (sidecar) and dockerdWithinRunnerContainer are mutually exclusive")
	}
	if k.Template.Kind == 0 && k.Image == "" {
		return errors.New("kubernetes: either image or a template with a `runner` container is required")
	}
	return nil
}

// Scope is where the pool's runners register.
func (p *Pool) Scope() scope.Scope {
	return scope.Scope{Enterprise: p.Enterprise, Organization: p.Organization, Repository: p.Repository}
}

// IsEphemeral reports whether runners take one job and exit (the default).
func (p *Pool) IsEphemeral() bool { return p.Ephemeral == nil || *p.Ephemeral }

// UsesToken reports whether the pool's runners register with the scope's
// registration token: persistent pools always, ephemeral pools when
// registration is RegistrationToken. Otherwise each runner gets a JIT config.
func (p *Pool) UsesToken() bool {
	return !p.IsEphemeral() || p.Registration == RegistrationToken
}

// Reruns is rerunsPerRun, or its default.
func (p *Pool) Reruns() int {
	if p.RerunsPerRun == nil {
		return DefaultRerunsPerRun
	}
	return *p.RerunsPerRun
}

// Max is maxReplicas (validated to be set).
func (p *Pool) Max() int { return *p.MaxReplicas }

// ScaleDownDelay is scaleDownDelaySecondsAfterScaleOut, or its default.
func (p *Pool) ScaleDownDelay() time.Duration {
	if p.ScaleDownDelaySecondsAfterScaleOut == nil {
		return DefaultScaleDownDelay
	}
	return time.Duration(*p.ScaleDownDelaySecondsAfterScaleOut) * time.Second
}

// Trigger is the capacity one job reserves and how long the reservation lives.
func (p *Pool) Trigger() (amount int, duration time.Duration) {
	amount, duration = 1, DefaultTriggerDuration
	if len(p.ScaleUpTriggers) == 0 {
		return amount, duration
	}
	t := p.ScaleUpTriggers[0]
	if t.Amount != nil {
		amount = *t.Amount
	}
	if t.Duration.Duration > 0 {
		duration = t.Duration.Duration
	}
	return amount, duration
}

// Pool returns the pool named name, or nil.
func (c *Config) Pool(name string) *Pool {
	for i := range c.Pools {
		if c.Pools[i].Name == name {
			return &c.Pools[i]
		}
	}
	return nil
}
