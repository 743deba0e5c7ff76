package scope

import (
	"fmt"
	"strings"
)

// Parse reads a scope written by String ("organization/my-org",
// "repository/owner/name", "enterprise/slug").
func Parse(v string) (Scope, error) {
	kind, name, _ := strings.Cut(v, "/")
	var s Scope
	switch Kind(kind) {
	case Enterprise:
		s.Enterprise = name
	case Organization:
		s.Organization = name
	case Repository:
		s.Repository = name
	default:
		return Scope{}, fmt.Errorf("scope %q: want enterprise/<slug>, organization/<login> or repository/<owner>/<name>", v)
	}
	if err := s.Validate(); err != nil {
		return Scope{}, fmt.Errorf("scope %q: %w", v, err)
	}
	return s, nil
}
