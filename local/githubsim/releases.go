package githubsim

// actions/runner's releases, and GitHub's refusal of runners too old for them.
//
// GET /repos/actions/runner/releases/latest answers the newest release the
// simulator publishes (SetRunnerReleases, Options.RunnerReleases), with an
// ETag; a matching If-None-Match gets 304 and costs no rate limit, as for the
// runner lists. The answer is checked against GitHub's description like every
// other REST exchange (the operation is in local/apispec's subset). Every
// identity may read it: actions/runner is public. Other repositories have no
// releases here (404).
//
// GitHub's rules for self-hosted runners, as its changelog and the messages
// of the runner's listener and config.sh state them:
//   - a runner older than MinimumRunnerVersion cannot register: the real
//     POST /actions/runner-registration answers 404 "Your runner version is out
//     of date and can no longer register with GitHub. The minimum runner version
//     required to register with GitHub Actions is now 2.329.0." — here the
//     agents' POST /_runner/registrations answers the same (404, that message);
//   - a runner that has not installed a release within 30 days of its
//     publication (RunnerGrace), or older than the minimum, receives no job:
//     the broker answers its message poll 403 "Forbidden Runner version v2.320.0
//     is deprecated and cannot receive messages.", and the listener exits
//     ("Runner listener exit with terminated error"). Here a session that
//     reported such a version (runner_version) gets that answer to every poll
//     (GET /_runner/sessions/{id}/job), and no job. A runner that reports no
//     version is not judged.
// A registered runner stays listed (offline once its agent has gone), as on
// GitHub, where an outdated runner still registers and is never given a job.

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

	"github.com/runnerscaler/runnerscaler/internal/runnerversion"
)

// MinimumRunnerVersion is the oldest actions/runner GitHub lets register.
const MinimumRunnerVersion = "2.329.0"

// RunnerGrace is how long after a release's publication older runners still
// receive jobs.
const RunnerGrace = 30 * 24 * time.Hour

// RunnerRelease is an actions/runner release the simulator publishes.
type RunnerRelease struct {
	Version     string // e.g. "2.331.0"; the tag is "v" + Version
	PublishedAt time.Time
}

// SetRunnerReleases replaces the actions/runner releases the simulator
// publishes (any order). It panics on a version that is not MAJOR.MINOR.PATCH.
func (s *Server) SetRunnerReleases(rs ...RunnerRelease) {
	for _, r := range rs {
		if _, err := runnerversion.Parse(r.Version); err != nil {
			panic("githubsim: " + err.Error())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releases = slices.Clone(rs)
}

// publicRepository: a repository every identity may read (GET only).
func publicRepository(r *http.Request) bool {
	return r.Method == http.MethodGet && r.PathValue("owner") == "actions" && r.PathValue("repo") == "runner"
}

// latestRelease: GET /repos/{owner}/{repo}/releases/latest.
func (s *Server) latestRelease(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	latest, ok := s.latestRunnerReleaseLocked()
	s.mu.Unlock()
	if !publicRepository(r) || !ok {
		if s.authenticate(w, r, nil) {
			writeError(w, http.StatusNotFound, "Not Found")
		}
		return
	}
	body, _ := json.Marshal(releaseJSON(latest))
	sum := sha256.Sum256(body)
	etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
	notModified := r.Header.Get("If-None-Match") == etag
	if !s.authenticate(w, r, func() bool { return !notModified }) {
		return
	}
	w.Header().Set("ETag", etag)
	if notModified {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(body)
}

func (s *Server) latestRunnerReleaseLocked() (RunnerRelease, bool) {
	var latest RunnerRelease
	var lv runnerversion.Version
	for _, r := range s.releases {
		v, _ := runnerversion.Parse(r.Version) // checked by SetRunnerReleases
		if latest.Version == "" || v.Compare(lv) > 0 {
			latest, lv = r, v
		}
	}
	return latest, latest.Version != ""
}

// releaseJSON is a release as GitHub shows it (the description's release schema).
func releaseJSON(r RunnerRelease) map[string]any {
	id := objectID("release", r.Version)
	tag := "v" + r.Version
	u := apiURL + "/repos/actions/runner/releases/" + strconv.FormatInt(id, 10)
	return map[string]any{
		"url": u, "html_url": "https://github.com/actions/runner/releases/tag/" + tag, "assets_url": u + "/assets",
		"upload_url":  "https://uploads.github.com/repos/actions/runner/releases/" + strconv.FormatInt(id, 10) + "/assets{?name,label}",
		"tarball_url": apiURL + "/repos/actions/runner/tarball/" + tag, "zipball_url": apiURL + "/repos/actions/runner/zipball/" + tag,
		"id": id, "node_id": "RE_sim" + strconv.FormatInt(id, 10), "tag_name": tag, "target_commitish": "main", "name": tag,
		"body": "", "draft": false, "prerelease": false, "created_at": stamp(r.PublishedAt), "published_at": stamp(r.PublishedAt),
		"author": accountJSON("github-actions[bot]", "Bot"), "assets": []any{},
	}
}

// registrationRefusal is GitHub's answer to registering a runner of
// version ("" when it registers; a runner that reports none is not judged).
func registrationRefusal(version string) string {
	if version == "" || !olderThan(version, MinimumRunnerVersion) {
		return ""
	}
	return "Your runner version is out of date and can no longer register with GitHub. " +
		"The minimum runner version required to register with GitHub Actions is now " + MinimumRunnerVersion + "."
}

// messageRefusalLocked is the broker's answer to a message poll of a runner of
// version ("" when it gets jobs): below the minimum, or past the grace period
// of the first release published after it.
func (s *Server) messageRefusalLocked(version string) string {
	if version == "" {
		return ""
	}
	refused := olderThan(version, MinimumRunnerVersion)
	now := s.opts.Clock.Now()
	for _, r := range s.releases {
		if olderThan(version, r.Version) && !now.Before(r.PublishedAt.Add(RunnerGrace)) {
			refused = true
		}
	}
	if !refused {
		return ""
	}
	return fmt.Sprintf("Forbidden Runner version v%s is deprecated and cannot receive messages.", strings.TrimPrefix(version, "v"))
}

// olderThan: version a is older than b; a version that does not parse is
// older than any.
func olderThan(a, b string) bool {
	va, err := runnerversion.Parse(a)
	if err != nil {
		return true
	}
	vb, _ := runnerversion.Parse(b)
	return va.Compare(vb) < 0
}
