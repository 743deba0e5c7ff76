// Package groupaccess knows which repositories may use each pool's runner
// group, so that the webhook does not route a job to a pool whose runners
// GitHub will never give it.
//
// GitHub hands a job only to a runner whose group admits the job's repository:
// a group of visibility "selected" admits the repositories listed for it, one
// of visibility "private" the organization's private repositories, one of
// visibility "all" every repository. A workflow_job delivery does not say which
// groups a job may use. So the sweeper, which holds the GitHub credentials,
// reads each organization pool's group (Refresher, every RefreshEvery, with
// conditional requests) and keeps what it read in the table (Store, one item
// per scope and group); the webhook reads those items and skips a pool whose
// group does not admit the job's repository (Access.Admits).
package groupaccess

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Visibility is GitHub's name for who may use a runner group.
type Visibility string

// The visibilities of an organization's runner group.
const (
	// All: every repository of the organization.
	All Visibility = "all"
	// Selected: the repositories listed for the group.
	Selected Visibility = "selected"
	// Private: the organization's private repositories.
	Private Visibility = "private"
	// Unchecked: ours, not GitHub's: the group's repositories do not fit in
	// its item (Store.Put), and routing does not check the group.
	Unchecked Visibility = "unchecked"
)

// Access is who may use one runner group, as GitHub last said.
type Access struct {
	// Scope is the organization the group belongs to.
	Scope scope.Scope
	// Group is the group's name as the pools file writes it.
	Group string
	// GroupID is GitHub's id of the group.
	GroupID    int64
	Visibility Visibility
	// ETag is GitHub's for its answer about the group itself.
	ETag string
	// Pages are the group's repositories (Selected only), page by page as
	// GitHub listed them, each with its ETag.
	Pages []Page
	// ReadAt is when GitHub last answered (zero: never).
	ReadAt time.Time
}

// Page is one page of a group's repositories.
type Page struct {
	ETag string
	// Repositories are full names (owner/name).
	Repositories []string
}

// Repositories is every page's repositories.
func (a Access) Repositories() []string {
	var all []string
	for _, p := range a.Pages {
		all = append(all, p.Repositories...)
	}
	return all
}

// Admits reports whether GitHub gives the group's runners the jobs of
// repository (owner/name, compared case-insensitively); public says the
// delivery called the repository public. When it does not, why says so in
// words. A visibility this package does not know admits every repository:
// routing then stays as it was without the check.
func (a Access) Admits(repository string, public bool) (ok bool, why string) {
	switch a.Visibility {
	case Selected:
		if slices.ContainsFunc(a.Repositories(), func(r string) bool { return strings.EqualFold(r, repository) }) {
			return true, ""
		}
		return false, fmt.Sprintf("not among the group's selected repositories (%d)", len(a.Repositories()))
	case Private:
		if !public {
			return true, ""
		}
		return false, "the group admits private repositories only, and the repository is public"
	}
	return true, ""
}
