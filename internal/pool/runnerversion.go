package pool

import (
	"fmt"
	"regexp"
)

// runnerVersion is an actions/runner release number, with or without its tag's "v".
var runnerVersion = regexp.MustCompile(`^v?[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}$`)

// validateRunnerVersion checks runnerVersion's form; what GitHub accepts is
// package runnerversion's business.
func (p *Pool) validateRunnerVersion() error {
	if p.RunnerVersion != "" && !runnerVersion.MatchString(p.RunnerVersion) {
		return fmt.Errorf("runnerVersion: %q must be an actions/runner release number such as 2.330.0", p.RunnerVersion)
	}
	return nil
}
