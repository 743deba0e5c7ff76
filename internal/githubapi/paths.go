package githubapi

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// ErrPathSegment: a scope's name cannot be one REST path segment ("", "." or
// "..", which URL resolution drops or climbs). No request is made.
var ErrPathSegment = errors.New("github: a scope name is not a path segment")

// escaped returns s with each of its names escaped as one path segment
// (url.PathEscape), to build REST paths from: go-github's calls put the names
// they are given into their paths with fmt.Sprintf, unescaped, and so does path.
// A name's "/", "?", "#" or "%" then stays inside its own segment: it can never
// reach another endpoint, add a query or cut the path short. Names GitHub
// allows (letters, digits, "-", "_", ".") are unchanged by it. The scope it
// returns is for building paths only; keys and messages use s.
func escaped(s scope.Scope) (scope.Scope, error) {
	switch s.Kind() {
	case scope.Enterprise:
		e, err := segment(s, s.Enterprise)
		return scope.Scope{Enterprise: e}, err
	case scope.Organization:
		o, err := segment(s, s.Organization)
		return scope.Scope{Organization: o}, err
	}
	owner, err := segment(s, s.Owner())
	if err != nil {
		return scope.Scope{}, err
	}
	repo, err := segment(s, s.Repo())
	if err != nil {
		return scope.Scope{}, err
	}
	return scope.Scope{Repository: owner + "/" + repo}, nil
}

func segment(s scope.Scope, name string) (string, error) {
	switch name {
	case "", ".", "..":
		return "", fmt.Errorf("%s: %q: %w", s, name, ErrPathSegment)
	}
	return url.PathEscape(name), nil
}

// path is the REST path prefix of a scope whose names are escaped (escaped).
func path(s scope.Scope) string {
	switch s.Kind() {
	case scope.Enterprise:
		return "enterprises/" + s.Enterprise
	case scope.Organization:
		return "orgs/" + s.Organization
	default:
		return "repos/" + s.Repository
	}
}
