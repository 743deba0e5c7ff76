package githubsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Runner groups restrict which repositories' jobs their runners get, as on
// GitHub: a group of visibility "selected" admits the repositories listed for
// it, one of visibility "private" the organization's private repositories, one
// of visibility "all" (and the Default group) every repository. A runner never
// acquires a job its group does not admit (acquireLocked); the job waits for
// another runner. Repositories are private unless SetRepositoryPublic says
// otherwise.

// The visibilities of a runner group.
const (
	VisibilityAll      = "all"
	VisibilitySelected = "selected"
	VisibilityPrivate  = "private"
)

// ErrUnknownVisibility: SetGroupAccess was given a visibility GitHub does not have.
var ErrUnknownVisibility = fmt.Errorf("githubsim: visibility is not %q, %q or %q", VisibilityAll, VisibilitySelected, VisibilityPrivate)

// SetGroupAccess sets who may use the runner group named name of an
// organization or enterprise scope: visibility, and for VisibilitySelected the
// repositories (owner/name). It fails with ErrUnknownGroup for a group the
// scope does not have (the Default group cannot be restricted here) and
// ErrUnknownVisibility.
func (s *Server) SetGroupAccess(sc scope.Scope, name, visibility string, repos []string) error {
	switch visibility {
	case VisibilityAll, VisibilitySelected, VisibilityPrivate:
	default:
		return fmt.Errorf("group %q: %q: %w", name, visibility, ErrUnknownVisibility)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	groups := s.groups[sc.String()]
	for i := range groups {
		if strings.EqualFold(groups[i].Name, name) {
			groups[i].Visibility = visibility
			groups[i].Repositories = nil
			if visibility == VisibilitySelected {
				groups[i].Repositories = slices.Clone(repos)
			}
			return nil
		}
	}
	return fmt.Errorf("runner group %q of %s: %w", name, sc, ErrUnknownGroup)
}

// SetRepositoryPublic makes a repository public (or private again): its
// deliveries say so (repository.private), and groups of VisibilityPrivate no
// longer admit its jobs.
func (s *Server) SetRepositoryPublic(fullName string, public bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.public == nil {
		s.public = map[string]bool{}
	}
	s.public[strings.ToLower(fullName)] = public
}

// GroupAdmits reports whether the runner group named group of scope sc admits
// jobs of repository (owner/name), as acquiring a job checks it: the Default
// group, and a group the scope does not have, admit every repository.
func (s *Server) GroupAdmits(sc scope.Scope, group, repository string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := s.groupIDLocked(sc.String(), group)
	if err != nil {
		return true
	}
	return s.admitsLocked(sc.String(), id, repository)
}

// admitsLocked: the group id of scopeKey admits repository's jobs.
func (s *Server) admitsLocked(scopeKey string, id int64, repository string) bool {
	for _, g := range s.groups[scopeKey] {
		if g.ID != id {
			continue
		}
		switch g.Visibility {
		case VisibilitySelected:
			return slices.ContainsFunc(g.Repositories, func(r string) bool { return strings.EqualFold(r, repository) })
		case VisibilityPrivate:
			return !s.public[strings.ToLower(repository)]
		}
		return true
	}
	return true // the Default group
}

func (s *Server) repositoryPrivate(fullName string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.public[strings.ToLower(fullName)]
}

// groupOf finds group_id of the request's scope.
func (s *Server) groupOf(r *http.Request) (Group, bool) {
	id, _ := strconv.ParseInt(r.PathValue("group_id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == 1 {
		return Group{ID: 1, Name: "Default", Visibility: VisibilityAll}, true
	}
	for _, g := range s.groups[scopeOf(r).String()] {
		if g.ID == id {
			g.Repositories = slices.Clone(g.Repositories)
			return g, true
		}
	}
	return Group{}, false
}

// getGroup: GET /orgs/{org}/actions/runner-groups/{group_id}, with an ETag (a
// matching If-None-Match gets 304 and costs no rate limit).
func (s *Server) getGroup(w http.ResponseWriter, r *http.Request) {
	g, ok := s.groupOf(r)
	if !ok {
		if s.authenticate(w, r, nil) {
			writeError(w, http.StatusNotFound, "Not Found")
		}
		return
	}
	list := strings.TrimSuffix(r.URL.Path, "/"+r.PathValue("group_id"))
	body, _ := json.Marshal(runnerGroupJSON(list, g))
	s.conditional(w, r, body, "")
}

// groupRepositories: GET /orgs/{org}/actions/runner-groups/{group_id}/repositories
// with per_page/page, Link and ETag, as the runners list.
func (s *Server) groupRepositories(w http.ResponseWriter, r *http.Request) {
	g, ok := s.groupOf(r)
	if !ok {
		if s.authenticate(w, r, nil) {
			writeError(w, http.StatusNotFound, "Not Found")
		}
		return
	}
	perPage, page := intParam(r, "per_page", 30, 1, 100), intParam(r, "page", 1, 1, 1<<30)
	total := len(g.Repositories)
	from, to := min((page-1)*perPage, total), min(page*perPage, total)
	created := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	repos := make([]map[string]any, 0, to-from)
	for _, name := range g.Repositories[from:to] {
		owner, _, _ := strings.Cut(name, "/")
		repo := repositoryJSON(name, accountJSON(owner, "Organization"), created)
		repo["private"] = s.repositoryPrivate(name)
		repos = append(repos, repo)
	}
	body, _ := json.Marshal(map[string]any{"total_count": total, "repositories": repos})
	link := ""
	if to < total {
		last := (total + perPage - 1) / perPage
		link = fmt.Sprintf(`<%s?per_page=%d&page=%d>; rel="next", <%s?per_page=%d&page=%d>; rel="last"`,
			linkBase(r), perPage, page+1, linkBase(r), perPage, last)
	}
	s.conditional(w, r, body, link)
}

// conditional answers body (JSON) with its ETag and link (a Link header, ""
// for none), or 304 with neither body nor rate-limit cost when the request's
// If-None-Match is that ETag.
func (s *Server) conditional(w http.ResponseWriter, r *http.Request, body []byte, link string) {
	sum := sha256.Sum256(body)
	etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
	notModified := r.Header.Get("If-None-Match") == etag
	if !s.authenticate(w, r, func() bool { return !notModified }) {
		return
	}
	w.Header().Set("ETag", etag)
	if link != "" {
		w.Header().Set("Link", link)
	}
	if notModified {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(body)
}

// nextGroupIDLocked is a group id no group had (1 is Default's).
func (s *Server) nextGroupIDLocked() int64 {
	s.lastGroupID = max(s.lastGroupID+1, 2)
	return s.lastGroupID
}

// ReplaceGroup deletes the group named name of scope sc, if it has one, and
// makes a new one of that name, with a new id, as AddGroup does; it returns
// the new id.
func (s *Server) ReplaceGroup(sc scope.Scope, name string, repos []string) int64 {
	s.mu.Lock()
	key := sc.String()
	s.groups[key] = slices.DeleteFunc(s.groups[key], func(g Group) bool { return strings.EqualFold(g.Name, name) })
	s.mu.Unlock()
	return s.AddGroup(sc, name, repos)
}
