package githubsim

import (
	"errors"
	"fmt"
)

// Errors a runner agent gets from Register, as the real runner would see them.
var (
	ErrInvalidCredential = errors.New("githubsim: invalid or expired runner credential")
	ErrRunnerGone        = errors.New("githubsim: runner no longer exists")
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
}

// Register connects a runner agent. A JIT config brings its runner online; a
// registration token creates a runner (replacing one of the same name, like
// `config.sh --replace`). Expired or unknown credentials fail with ErrInvalidCredential.
func (s *Server) Register(reg Registration) (Runner, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Clock.Now()
	if reg.JITConfig != "" {
		c, ok := s.jitConfigs[reg.JITConfig]
		if !ok || !now.Before(c.expires) {
			return Runner{}, fmt.Errorf("jit config: %w", ErrInvalidCredential)
		}
		rn, ok := s.runners[c.runnerID]
		if !ok {
			return Runner{}, fmt.Errorf("jit runner %d: %w", c.runnerID, ErrRunnerGone)
		}
		delete(s.jitConfigs, reg.JITConfig) // single use
		rn.Online, rn.Registered = true, true
		return *rn, nil
	}
	c, ok := s.regTokens[reg.Token]
	if !ok || !now.Before(c.expires) || c.scope.String() != reg.Scope {
		return Runner{}, fmt.Errorf("registration token: %w", ErrInvalidCredential)
	}
	for id, x := range s.runners {
		if x.Scope.String() == reg.Scope && x.Name == reg.Name {
			delete(s.runners, id)
		}
	}
	s.nextID++
	rn := &Runner{ID: s.nextID, Name: reg.Name, Scope: c.scope, Labels: append([]string{"self-hosted", "Linux", "X64"}, reg.Labels...),
		GroupID: 1, Online: true, Busy: false, Ephemeral: reg.Ephemeral, Registered: true}
	s.runners[rn.ID] = rn
	return *rn, nil
}

// SetBusy marks a runner as running a job (or idle). ErrRunnerGone if it was removed.
func (s *Server) SetBusy(id int64, busy bool) error {
	return s.withRunner(id, func(rn *Runner) { rn.Busy = busy })
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
	return nil
}
