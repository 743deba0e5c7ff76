// Package scope names where self-hosted runners are registered on GitHub: an
// enterprise, an organization or a repository — exactly one of them.
package scope

import (
	"fmt"
	"strings"
)

// Scope is exactly one of Enterprise (slug), Organization (login) or Repository
// (owner/name). The zero Scope is invalid.
type Scope struct {
	Enterprise   string
	Organization string
	Repository   string
}

// Kind is the scope's level.
type Kind string

// Scope kinds, named like the GitHub REST paths they map to.
const (
	Enterprise   Kind = "enterprise"
	Organization Kind = "organization"
	Repository   Kind = "repository"
)

// Validate reports an error unless exactly one field is set and a repository is owner/name.
func (s Scope) Validate() error {
	set := 0
	for _, v := range []string{s.Enterprise, s.Organization, s.Repository} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("exactly one of enterprise, organization, repository must be set (got %d)", set)
	}
	if s.Repository != "" {
		owner, name, ok := strings.Cut(s.Repository, "/")
		if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("repository %q: want owner/name", s.Repository)
		}
	}
	return nil
}

// Kind tells which field is set.
func (s Scope) Kind() Kind {
	switch {
	case s.Enterprise != "":
		return Enterprise
	case s.Organization != "":
		return Organization
	default:
		return Repository
	}
}

// Name is the value of the field that is set.
func (s Scope) Name() string {
	switch s.Kind() {
	case Enterprise:
		return s.Enterprise
	case Organization:
		return s.Organization
	default:
		return s.Repository
	}
}

// String renders the scope as "organization/my-org", usable as a map or cache key.
// GitHub names are case-insensitive, so the name is lower-cased.
func (s Scope) String() string { return string(s.Kind()) + "/" + strings.ToLower(s.Name()) }

// Owner is the repository's owner (empty for other kinds).
func (s Scope) Owner() string {
	owner, _, _ := strings.Cut(s.Repository, "/")
	return owner
}

// Repo is the repository's name without its owner (empty for other kinds).
func (s Scope) Repo() string {
	_, name, _ := strings.Cut(s.Repository, "/")
	return name
}
