package main

import (
	"strings"
	"testing"
)

// TestDrainRefusesAnotherQualifier: `drain` invokes the sweeper's drain alias
// only; a function qualified with another alias is refused before any AWS call.
func TestDrainRefusesAnotherQualifier(t *testing.T) {
	t.Parallel()
	err := drain(t.Context(), []string{"-function", "stack-sweeper:nudge"}, env{getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), `only through its "drain" alias`) {
		t.Fatalf("drain -function stack-sweeper:nudge: error %v, want a refusal naming the drain alias", err)
	}
}
