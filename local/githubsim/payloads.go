package githubsim

import (
	"crypto/sha1"
	"encoding/hex"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// The bodies the simulator sends that carry GitHub objects (a workflow_job
// delivery, an installation, a runner group) are built here, with every field
// GitHub's description requires for them (local/apispec checks it in the tests):
// the fields the product reads carry the simulator's state, the others plausible
// values derived from it (ids from names, URLs of api.github.com).

const apiURL = "https://api.github.com"

// objectID is a stable, positive id for a named object (a user, a repository).
func objectID(kind, name string) int64 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(kind + "/" + strings.ToLower(name)))
	return int64(h.Sum32()&0x7fffffff) + 1
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// accountJSON is a simple-user: a user or an organization as GitHub shows an
// account (a repository's owner, a delivery's sender, an installation's account).
func accountJSON(login, kind string) map[string]any {
	id := objectID("account", login)
	u := apiURL + "/users/" + login
	return map[string]any{
		"login": login, "id": id, "node_id": "U_sim" + strconv.FormatInt(id, 10), "type": kind, "site_admin": false,
		"avatar_url": "https://avatars.githubusercontent.com/u/" + strconv.FormatInt(id, 10) + "?v=4", "gravatar_id": "",
		"url": u, "html_url": "https://github.com/" + login, "followers_url": u + "/followers",
		"following_url": u + "/following{/other_user}", "gists_url": u + "/gists{/gist_id}",
		"starred_url": u + "/starred{/owner}{/repo}", "subscriptions_url": u + "/subscriptions",
		"organizations_url": u + "/orgs", "repos_url": u + "/repos", "events_url": u + "/events{/privacy}",
		"received_events_url": u + "/received_events",
	}
}

// repositoryJSON is a delivery's repository (owner/name, owned by owner).
func repositoryJSON(fullName string, owner map[string]any, created time.Time) map[string]any {
	_, name, _ := strings.Cut(fullName, "/")
	id := objectID("repository", fullName)
	u := apiURL + "/repos/" + fullName
	repo := map[string]any{
		"id": id, "node_id": "R_sim" + strconv.FormatInt(id, 10), "name": name, "full_name": fullName,
		"owner": owner, "private": true, "fork": false, "archived": false, "disabled": false,
		"description": nil, "homepage": nil, "language": "Go", "license": nil, "mirror_url": nil,
		"default_branch": "main", "size": 1, "forks": 0, "forks_count": 0, "open_issues": 0, "open_issues_count": 0,
		"stargazers_count": 0, "watchers": 0, "watchers_count": 0,
		"has_downloads": true, "has_issues": true, "has_projects": true, "has_wiki": true, "has_pages": false,
		"created_at": stamp(created), "updated_at": stamp(created), "pushed_at": stamp(created),
		"url": u, "html_url": "https://github.com/" + fullName, "clone_url": "https://github.com/" + fullName + ".git",
		"git_url": "git://github.com/" + fullName + ".git", "ssh_url": "git@github.com:" + fullName + ".git",
		"svn_url": "https://github.com/" + fullName,
	}
	for key, path := range map[string]string{
		"forks_url": "forks", "keys_url": "keys{/key_id}", "collaborators_url": "collaborators{/collaborator}",
		"teams_url": "teams", "hooks_url": "hooks", "issue_events_url": "issues/events{/number}", "events_url": "events",
		"assignees_url": "assignees{/user}", "branches_url": "branches{/branch}", "tags_url": "tags",
		"blobs_url": "git/blobs{/sha}", "git_tags_url": "git/tags{/sha}", "git_refs_url": "git/refs{/sha}",
		"trees_url": "git/trees{/sha}", "statuses_url": "statuses/{sha}", "languages_url": "languages",
		"stargazers_url": "stargazers", "contributors_url": "contributors", "subscribers_url": "subscribers",
		"subscription_url": "subscription", "commits_url": "commits{/sha}", "git_commits_url": "git/commits{/sha}",
		"comments_url": "comments{/number}", "issue_comment_url": "issues/comments{/number}",
		"contents_url": "contents/{+path}", "compare_url": "compare/{base}...{head}", "merges_url": "merges",
		"archive_url": "{archive_format}{/ref}", "downloads_url": "downloads", "issues_url": "issues{/number}",
		"pulls_url": "pulls{/number}", "milestones_url": "milestones{/number}", "labels_url": "labels{/name}",
		"notifications_url": "notifications{?since,all,participating}", "releases_url": "releases{/id}",
		"deployments_url": "deployments",
	} {
		repo[key] = u + "/" + path
	}
	return repo
}

func organizationJSON(login string) map[string]any {
	id := objectID("account", login)
	u := apiURL + "/orgs/" + login
	return map[string]any{
		"login": login, "id": id, "node_id": "O_sim" + strconv.FormatInt(id, 10), "url": u,
		"repos_url": u + "/repos", "events_url": u + "/events", "hooks_url": u + "/hooks", "issues_url": u + "/issues",
		"members_url": u + "/members{/member}", "public_members_url": u + "/public_members{/member}",
		"avatar_url": "https://avatars.githubusercontent.com/u/" + strconv.FormatInt(id, 10) + "?v=4", "description": nil,
	}
}

func enterpriseJSON(slug string, created time.Time) map[string]any {
	id := objectID("enterprise", slug)
	return map[string]any{
		"id": id, "node_id": "E_sim" + strconv.FormatInt(id, 10), "name": slug, "slug": slug,
		"html_url": "https://github.com/enterprises/" + slug, "created_at": stamp(created), "updated_at": stamp(created),
		"avatar_url": "https://avatars.githubusercontent.com/b/" + strconv.FormatInt(id, 10) + "?v=4",
	}
}

// workflowJobPayload is the workflow_job delivery of j's current state; its
// runner's group, when the runner still exists, names runner_group_*.
func (s *Server) workflowJobPayload(j Job) map[string]any {
	owner, _, _ := strings.Cut(j.Repository, "/")
	ownerType := "User"
	if j.Organization != "" {
		ownerType = "Organization"
	}
	var groupID, groupName any
	if j.RunnerID != 0 {
		s.mu.Lock()
		if rn, ok := s.runners[j.RunnerID]; ok {
			groupID, groupName = rn.GroupID, s.groupNameLocked(rn.Scope.String(), rn.GroupID)
		}
		s.mu.Unlock()
	}
	sum := sha1.Sum([]byte(strconv.FormatInt(j.RunID, 10)))
	repoURL := apiURL + "/repos/" + j.Repository
	started, completed := j.QueuedAt, any(nil)
	if !j.StartedAt.IsZero() {
		started = j.StartedAt
	}
	if j.State == JobCompleted {
		completed = stamp(j.EndedAt)
	}
	jobID, runID := strconv.FormatInt(j.ID, 10), strconv.FormatInt(j.RunID, 10)
	payload := map[string]any{
		"action": string(j.State),
		"workflow_job": map[string]any{
			"id": j.ID, "run_id": j.RunID, "run_attempt": max(j.RunAttempt, 1), "node_id": "CR_sim" + jobID,
			"run_url": repoURL + "/actions/runs/" + runID, "url": repoURL + "/actions/jobs/" + jobID,
			"html_url":      "https://github.com/" + j.Repository + "/actions/runs/" + runID + "/job/" + jobID,
			"check_run_url": repoURL + "/check-runs/" + jobID,
			"head_sha":      hex.EncodeToString(sum[:]), "head_branch": "main", "workflow_name": "CI", "name": j.Name,
			"status": string(j.State), "conclusion": nullableString(string(j.Conclusion)), "labels": j.Labels, "steps": []any{},
			"created_at": stamp(j.QueuedAt), "started_at": stamp(started), "completed_at": completed,
			"runner_id": nullable(j.RunnerID), "runner_name": nullableString(j.RunnerName),
			"runner_group_id": groupID, "runner_group_name": groupName,
		},
		"repository": repositoryJSON(j.Repository, accountJSON(owner, ownerType), j.QueuedAt),
		"sender":     accountJSON("sim-actor", "User"),
	}
	payload["repository"].(map[string]any)["private"] = s.repositoryPrivate(j.Repository)
	if j.Labels == nil {
		payload["workflow_job"].(map[string]any)["labels"] = []string{}
	}
	if j.Organization != "" {
		payload["organization"] = organizationJSON(j.Organization)
	}
	if j.Enterprise != "" {
		payload["enterprise"] = enterpriseJSON(j.Enterprise, j.QueuedAt)
	}
	if j.Environment != "" {
		payload["deployment"] = deploymentJSON(j, accountJSON("sim-actor", "User"))
	}
	return payload
}

func (s *Server) groupNameLocked(scopeKey string, id int64) string {
	for _, g := range s.groups[scopeKey] {
		if g.ID == id {
			return g.Name
		}
	}
	return "Default"
}

// installationJSON is the App's installation id on an organization.
func (s *Server) installationJSON(id int64, org string) map[string]any {
	created := stamp(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	u := apiURL + "/app/installations/" + strconv.FormatInt(id, 10)
	return map[string]any{
		"id": id, "app_id": s.opts.AppID, "app_slug": "runnerscaler", "client_id": "Iv1.sim" + strconv.FormatInt(s.opts.AppID, 10),
		"target_id": objectID("account", org), "target_type": "Organization", "account": accountJSON(org, "Organization"),
		"repository_selection": "all", "single_file_name": nil, "access_tokens_url": u + "/access_tokens",
		"html_url":         "https://github.com/organizations/" + org + "/settings/installations/" + strconv.FormatInt(id, 10),
		"repositories_url": apiURL + "/installation/repositories", "events": []string{"workflow_job"},
		"permissions": map[string]any{"organization_self_hosted_runners": "write", "administration": "write", "actions": s.actionsPermission()},
		"created_at":  created, "updated_at": created, "suspended_by": nil, "suspended_at": nil,
	}
}

// runnerGroupJSON is a runner group as GET .../actions/runner-groups lists it.
// listPath is the list's path, e.g. /orgs/acme/actions/runner-groups.
func runnerGroupJSON(listPath string, g Group) map[string]any {
	base := apiURL + listPath + "/" + strconv.FormatInt(g.ID, 10)
	out := map[string]any{
		"id": g.ID, "name": g.Name, "visibility": g.Visibility, "default": g.ID == 1,
		"runners_url": base + "/runners", "inherited": false, "allows_public_repositories": false,
		"restricted_to_workflows": false, "selected_workflows": []string{}, "workflow_restrictions_read_only": false,
	}
	if g.Visibility == "selected" {
		out["selected_repositories_url"] = base + "/repositories"
	}
	return out
}
