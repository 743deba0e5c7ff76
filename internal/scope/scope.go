// Package scope names where self-hosted runners are registered on GitHub: an
// enterprise, an organization or a repository — exactly one of them.
package scope

import (
	"fmt"
	"regexp"
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

// Validate reports an error unless exactly one field is set and its name is one
// GitHub can have: an organization or a repository owner is a login (letters,
// digits and single hyphens, neither first nor last, at most 39 characters; a
// repository owner may also be a managed user, a login, '_' and the
// enterprise's shortcode of letters and digits), a
// repository name is letters, digits, '.', '_' and '-' (at most 100, not "." or
// ".."), an enterprise slug letters, digits and hyphens. Names go into REST paths
// unescaped, so one outside these sets could address another resource. The
// error names the field and the value.
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
	switch s.Kind() {
	case Enterprise:
		if !enterpriseSlug.MatchString(s.Enterprise) {
			return fmt.Errorf("enterprise %q: want an enterprise slug (letters, digits and hyphens)", s.Enterprise)
		}
	case Organization:
		if !isLogin(s.Organization) {
			return fmt.Errorf("organization %q: want %s", s.Organization, loginRule)
		}
	default:
		return validateRepository(s.Repository)
	}
	return nil
}

var (
	login          = regexp.MustCompile(`^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$`)
	repoName       = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	enterpriseSlug = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
	shortcode      = regexp.MustCompile(`^[A-Za-z0-9]+$`)
)

const (
	maxLogin    = 39
	maxRepoName = 100
	loginRule   = "a GitHub login (letters, digits and single hyphens, not first or last, at most 39 characters)"
)

func isLogin(v string) bool { return len(v) <= maxLogin && login.MatchString(v) }

// isOwner: a login, or an Enterprise Managed User's (login_shortcode).
func isOwner(v string) bool {
	handle, code, managed := strings.Cut(v, "_")
	return isLogin(handle) && (!managed || shortcode.MatchString(code))
}

func validateRepository(v string) error {
	owner, name, ok := strings.Cut(v, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("repository %q: want owner/name", v)
	}
	if !isOwner(owner) {
		return fmt.Errorf("repository owner %q (of %q): want %s, or a managed user's login_shortcode", owner, v, loginRule)
	}
	if len(name) > maxRepoName || !repoName.MatchString(name) || name == "." || name == ".." {
		return fmt.Errorf("repository name %q (of %q): want letters, digits, '.', '_' and '-', "+
			"at most %d characters, not \".\" or \"..\"", name, v, maxRepoName)
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
