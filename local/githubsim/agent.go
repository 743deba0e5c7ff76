package githubsim

import (
	"errors"
	"fmt"
	"strings"
)

// Errors a runner agent gets from Register (and the /_runner/ endpoints), as the
// real runner would see them.
var (
	ErrInvalidCredential = errors.New("githubsim: invalid or expired runner credential")
	ErrRunnerGone        = errors.New("githubsim: runner no longer exists")
	// ErrRunnerExists: a runner of that name exists in the scope and the
	// registration did not ask to replace it (config.sh without --replace).
	ErrRunnerExists = errors.New("githubsim: a runner with the same name already exists")
	// ErrUnknownGroup: the registration names a runner group the scope does not have.
	ErrUnknownGroup = errors.New("githubsim: no such runner group")
)

// Registration is what a runner agent presents: a JIT config, or a registration
// token with the name, scope, labels and mode it configures.
type Registration struct {
	JITConfig string
	Token     string
	Scope     string // scope.Scope.String() of the runner's URL, for token registrations
	Name      string
	Labels    []string
	Ephemeral bool
	Group     string // runner group name for token registrations ("" or "Default": the default group)
}

// Register connects a runner agent. A JIT config brings its runner online; a
// registration token creates a runner (replacing one of the same name, like
// `config.sh --replace`). Expired, unknown or already used credentials fail with
// ErrInvalidCredential; a JIT config whose runner was deleted with ErrRunnerGone.
func (s *Server) Register(reg Registration) (Runner, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rn *Runner
	var err error
	if reg.JITConfig != "" {
		rn, err = s.useJITLocked(reg.JITConfig, true)
	} else if err = s.agentBudgetLocked(reg.Scope); err == nil {
		rn, err = s.registerLocked(reg, true)
	}
	if err != nil {
		return Runner{}, err
	}
	rn.Online, rn.Registered = true, true
	return *rn, nil
}

// useJITLocked returns the runner of a JIT config that can still be used, and
// spends it when spend is set (they are single use).
func (s *Server) useJITLocked(enc string, spend bool) (*Runner, error) {
	c, ok := s.jitConfigs[enc]
	switch {
	case !ok:
		return nil, fmt.Errorf("jit config: %w", ErrInvalidCredential)
	case c.used:
		if _, exists := s.runners[c.runnerID]; !exists {
			return nil, fmt.Errorf("jit config already used, runner %d deleted: %w: %w", c.runnerID, ErrInvalidCredential, ErrRunnerGone)
		}
		return nil, fmt.Errorf("jit config already used: %w", ErrInvalidCredential)
	case !s.opts.Clock.Now().Before(c.expires):
		return nil, fmt.Errorf("jit config expired: %w", ErrInvalidCredential)
	}
	rn, ok := s.runners[c.runnerID]
	if !ok {
		return nil, fmt.Errorf("jit runner %d: %w", c.runnerID, ErrRunnerGone)
	}
	if spend {
		c.used = true
		s.jitConfigs[enc] = c
	}
	return rn, nil
}

// agentBudgetLocked counts a token registration against the budget, if any.
func (s *Server) agentBudgetLocked(scope string) error {
	if s.budget == nil {
		return nil
	}
	return s.budget.agentRegistration(scope, s.opts.Clock.Now())
}

// registerLocked creates a runner, offline, from a registration token, deleting a
// runner of the same name in the scope when replace is set.
func (s *Server) registerLocked(reg Registration, replace bool) (*Runner, error) {
	c, ok := s.regTokens[reg.Token]
	if !ok || !s.opts.Clock.Now().Before(c.expires) || c.scope.String() != reg.Scope {
		return nil, fmt.Errorf("registration token: %w", ErrInvalidCredential)
	}
	group, err := s.groupIDLocked(c.scope.String(), reg.Group)
	if err != nil {
		return nil, err
	}
	for id, x := range s.runners {
		if x.Scope.String() == reg.Scope && x.Name == reg.Name {
			if !replace {
				return nil, fmt.Errorf("runner %q: %w", reg.Name, ErrRunnerExists)
			}
			delete(s.runners, id)
			s.forgetRunnerLocked(id)
		}
	}
	s.nextID++
	rn := &Runner{ID: s.nextID, Name: reg.Name, Scope: c.scope, Labels: append([]string{"self-hosted", "Linux", "X64"}, reg.Labels...),
		GroupID: group, Ephemeral: reg.Ephemeral}
	s.runners[rn.ID] = rn
	return rn, nil
}

// groupIDLocked resolves a runner group name of a scope ("" is the default group).
func (s *Server) groupIDLocked(scopeKey, name string) (int64, error) {
	if name == "" || strings.EqualFold(name, "Default") {
		return 1, nil
	}
	for _, g := range s.groups[scopeKey] {
		if strings.EqualFold(g.Name, name) {
			return g.ID, nil
		}
	}
	return 0, fmt.Errorf("runner group %q: %w", name, ErrUnknownGroup)
}

// SetBusy marks a runner as running a job (or idle). ErrRunnerGone if it was removed.
func (s *Server) SetBusy(id int64, busy bool) error {
	return s.withRunner(id, func(rn *Runner) {
		if busy && !rn.Busy {
			s.assignLocked(rn, uint64(id)|1<<63)
		}
		rn.Busy = busy
	})
}

// SetOnline marks a runner online or offline (its agent connected or not).
func (s *Server) SetOnline(id int64, online bool) error {
	return s.withRunner(id, func(rn *Runner) { rn.Online = online })
}

// FinishJob ends the runner's job: it becomes idle, and an ephemeral runner is
// removed by GitHub itself, as after a real ephemeral job.
func (s *Server) FinishJob(id int64) error {
	return s.withRunner(id, func(rn *Runner) {
		rn.Busy = false
		if rn.Ephemeral {
			delete(s.runners, id)
			s.forgetRunnerLocked(id)
		}
	})
}

// withRunner applies change to runner id under the lock; ErrRunnerGone if it was removed.
func (s *Server) withRunner(id int64, change func(*Runner)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, ok := s.runners[id]
	if !ok {
		return ErrRunnerGone
	}
	change(rn)
	s.notifyLocked()
	return nil
}
