package githubapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// recorder is a GitHub stand-in that records the raw request target of every
// request (method and RequestURI, exactly as the client sent them) and answers
// each with the minimal body the client needs.
type recorder struct {
	mu       sync.Mutex
	requests []string
}

func newRecorder(t *testing.T) (*recorder, string) {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(rec.serve))
	t.Cleanup(srv.Close)
	return rec, srv.URL + "/"
}

func (rec *recorder) serve(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.requests = append(rec.requests, r.Method+" "+r.RequestURI)
	rec.mu.Unlock()
	path, _, _ := strings.Cut(r.RequestURI, "?")
	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	var body any
	status := http.StatusOK
	switch {
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	case strings.HasSuffix(path, "/access_tokens"):
		status, body = http.StatusCreated, map[string]any{"token": "ghs_installation", "expires_at": expires}
	case strings.HasSuffix(path, "/installation"):
		body = map[string]any{"id": 9}
	case strings.HasSuffix(path, "/registration-token"):
		status, body = http.StatusCreated, map[string]any{"token": "AREG", "expires_at": expires}
	case strings.HasSuffix(path, "/generate-jitconfig"):
		status, body = http.StatusCreated, map[string]any{"runner": map[string]any{"id": 5}, "encoded_jit_config": "jit"}
	case strings.HasSuffix(path, "/runner-groups"):
		body = map[string]any{"total_count": 1, "runner_groups": []any{map[string]any{"id": 3, "name": "g"}}}
	default:
		body = map[string]any{"total_count": 0, "runners": []any{}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// take returns the requests recorded since the last take.
func (rec *recorder) take() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.requests
	rec.requests = nil
	return out
}

// TestScopeNamesAreEscapedPathSegments: a scope name that holds "/", "?", "#" or
// "%" reaches exactly the endpoint of its own (escaped) name, never another path
// or a query, for every call the sweeper makes; a name that is "." or "..",
// which URL resolution would drop or climb, is refused before any request. The
// scopes are struct literals: the parser would refuse some of these names, and
// escaping is a defence of its own.
func TestScopeNamesAreEscapedPathSegments(t *testing.T) {
	t.Parallel()
	rec, base := newRecorder(t)
	c, err := githubapi.New(githubapi.Config{BaseURL: base, Auth: githubapi.Auth{Token: "ghp_test"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    scope.Scope
		want string // the escaped prefix of every path
	}{
		{scope.Scope{Repository: "victim/repo?"}, "/repos/victim/repo%3F"},
		{scope.Scope{Repository: "victim/repo#x"}, "/repos/victim/repo%23x"},
		{scope.Scope{Repository: "victim/other/repo"}, "/repos/victim/other%2Frepo"},
		{scope.Scope{Repository: "victim/%2e%2e"}, "/repos/victim/%252e%252e"},
		{scope.Scope{Organization: "victim/actions/runners/5#"}, "/orgs/victim%2Factions%2Frunners%2F5%23"},
		{scope.Scope{Organization: "acme?page=9"}, "/orgs/acme%3Fpage=9"},
		{scope.Scope{Enterprise: "corp?x"}, "/enterprises/corp%3Fx"},
	} {
		t.Run(tc.s.String(), func(t *testing.T) {
			ctx := t.Context()
			calls := []struct {
				want string
				call func(context.Context) error
			}{
				{"POST " + tc.want + "/actions/runners/registration-token", func(ctx context.Context) error {
					_, err := c.RegistrationToken(ctx, tc.s)
					return err
				}},
				{"POST " + tc.want + "/actions/runners/generate-jitconfig", func(ctx context.Context) error {
					_, err := c.JITConfig(ctx, tc.s, "r-0", []string{"x"}, 1)
					return err
				}},
				{"GET " + tc.want + "/actions/runners?per_page=100&page=1", func(ctx context.Context) error {
					_, err := c.Runners(ctx, tc.s)
					return err
				}},
				{"DELETE " + tc.want + "/actions/runners/7", func(ctx context.Context) error { return c.RemoveRunner(ctx, tc.s, 7) }},
			}
			if tc.s.Kind() != scope.Repository {
				calls = append(calls, struct {
					want string
					call func(context.Context) error
				}{"GET " + tc.want + "/actions/runner-groups?per_page=100", func(ctx context.Context) error {
					_, err := c.RunnerGroupID(ctx, tc.s, "g")
					return err
				}})
			}
			for _, call := range calls {
				err := call.call(ctx)
				if got := rec.take(); err != nil || !slices.Equal(got, []string{call.want}) {
					t.Errorf("requests %q (error %v), want exactly %q", got, err, call.want)
				}
			}
		})
	}
}

// TestDotNamesAreRefused: "." and ".." would be resolved away as path segments
// (and go-github refuses a ".." even escaped): a scope named so is refused, and
// nothing is sent.
func TestDotNamesAreRefused(t *testing.T) {
	t.Parallel()
	rec, base := newRecorder(t)
	c, err := githubapi.New(githubapi.Config{BaseURL: base, Auth: githubapi.Auth{Token: "ghp_test"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, tc := range []struct {
		s scope.Scope
		// segment: refused as a name that is no path segment (ErrPathSegment);
		// else by go-github, for a ".." the escaped path still decodes to.
		segment bool
	}{
		{scope.Scope{Repository: "victim/.."}, true}, {scope.Scope{Repository: "victim/."}, true},
		{scope.Scope{Repository: "../victim"}, true}, {scope.Scope{Organization: ".."}, true},
		{scope.Scope{Organization: "."}, true}, {scope.Scope{Enterprise: ".."}, true},
		{scope.Scope{Enterprise: "corp/../orgs/victim"}, false},
	} {
		errs := []error{c.RemoveRunner(ctx, tc.s, 7)}
		_, err := c.Runners(ctx, tc.s)
		errs = append(errs, err)
		_, err = c.RegistrationToken(ctx, tc.s)
		errs = append(errs, err)
		_, err = c.JITConfig(ctx, tc.s, "r-0", nil, 1)
		errs = append(errs, err)
		for i, err := range errs {
			if err == nil || tc.segment && !errors.Is(err, githubapi.ErrPathSegment) {
				t.Errorf("%s: call %d: %v, want it refused", tc.s, i, err)
			}
		}
		if got := rec.take(); len(got) != 0 {
			t.Errorf("%s: requests %q, want none", tc.s, got)
		}
	}
}

// TestInstallationLookupIsEscaped: the App's installation lookup of a scope is
// escaped like the calls it serves.
func TestInstallationLookupIsEscaped(t *testing.T) {
	t.Parallel()
	_, pemKey := key(t)
	rec, base := newRecorder(t)
	r, err := githubapi.NewRouter(githubapi.Config{BaseURL: base, Auth: githubapi.Auth{AppID: appID, PrivateKey: pemKey}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    scope.Scope
		want string
	}{
		{scope.Scope{Organization: "victim/x?"}, "/orgs/victim%2Fx%3F"},
		{scope.Scope{Repository: "victim/other/repo#"}, "/repos/victim/other%2Frepo%23"},
	} {
		if err := r.RemoveRunner(t.Context(), tc.s, 7); err != nil {
			t.Fatalf("%s: %v", tc.s, err)
		}
		got := rec.take()
		want := []string{"GET " + tc.want + "/installation", "DELETE " + tc.want + "/actions/runners/7"}
		if got = slices.DeleteFunc(got, func(r string) bool { return strings.HasSuffix(r, "/access_tokens") }); !slices.Equal(got, want) {
			t.Errorf("%s: requests %q, want %q", tc.s, got, want)
		}
	}
}
