package apispec_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/local/apispec"
)

func description(t *testing.T) *apispec.Description {
	t.Helper()
	d, err := apispec.Load()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var jsonHeader = http.Header{"Content-Type": {"application/json; charset=utf-8"}}

const runnerList = `{"total_count":1,"runners":[{"id":7,"name":"r-1","os":"Linux","status":"online","busy":false,
	"labels":[{"id":1,"name":"self-hosted","type":"read-only"}]}]}`

func TestCheckExchangeAcceptsConformingExchanges(t *testing.T) {
	d := description(t)
	cases := []struct {
		name    string
		x       apispec.Exchange
		match   string
		generic bool
	}{
		{"org runners", apispec.Exchange{Method: "GET", Path: "/orgs/acme/actions/runners", Query: "per_page=100&page=2",
			Status: 200, ResponseHeader: jsonHeader, ResponseBody: []byte(runnerList)}, "actions/list-self-hosted-runners-for-org", false},
		{"remove", apispec.Exchange{Method: "DELETE", Path: "/repos/acme/app/actions/runners/7", Status: 204},
			"actions/delete-self-hosted-runner-from-repo", false},
		{"enterprise runners, from ghec", apispec.Exchange{Method: "GET", Path: "/enterprises/big/actions/runners",
			Status: 200, ResponseHeader: jsonHeader, ResponseBody: []byte(runnerList)},
			"enterprise-admin/list-self-hosted-runners-for-enterprise", false},
		{"jit config", apispec.Exchange{Method: "POST", Path: "/orgs/acme/actions/runners/generate-jitconfig",
			RequestHeader: jsonHeader, RequestBody: []byte(`{"name":"r-1","runner_group_id":1,"labels":["gpu"]}`),
			Status: 201, ResponseHeader: jsonHeader, ResponseBody: []byte(`{"runner":{"id":7,"name":"r-1","os":"Linux",
			"status":"offline","busy":false,"labels":[]},"encoded_jit_config":"abc"}`)},
			"actions/generate-runner-jitconfig-for-org", false},
		{"not modified", apispec.Exchange{Method: "GET", Path: "/orgs/acme/actions/runners", Status: 304},
			"actions/list-self-hosted-runners-for-org", true},
		{"not found", apispec.Exchange{Method: "DELETE", Path: "/orgs/acme/actions/runners/7", Status: 404,
			ResponseHeader: jsonHeader, ResponseBody: []byte(`{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)},
			"actions/delete-self-hosted-runner-from-org", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := d.CheckExchange(t.Context(), c.x)
			if err != nil {
				t.Fatal(err)
			}
			if m.OperationID != c.match || m.Generic != c.generic {
				t.Errorf("matched %+v, want %s (generic %v)", m, c.match, c.generic)
			}
		})
	}
}

func TestCheckExchangeRejects(t *testing.T) {
	d := description(t)
	cases := []struct {
		name string
		x    apispec.Exchange
		want string // in the error
	}{
		{"a wrong status", apispec.Exchange{Method: "DELETE", Path: "/orgs/acme/actions/runners/7", Status: 200,
			ResponseHeader: jsonHeader, ResponseBody: []byte(`{}`)}, "status 200 is not allowed"},
		{"a 304 to a POST", apispec.Exchange{Method: "POST", Path: "/orgs/acme/actions/runners/registration-token", Status: 304},
			"status 304 is not allowed"},
		{"a body missing a required field", apispec.Exchange{Method: "GET", Path: "/orgs/acme/actions/runners", Status: 200,
			ResponseHeader: jsonHeader, ResponseBody: []byte(`{"total_count":1,"runners":[{"id":7,"name":"r-1","status":"online","busy":false,"labels":[]}]}`)},
			`property "os" is missing`},
		{"a field of the wrong type", apispec.Exchange{Method: "POST", Path: "/orgs/acme/actions/runners/registration-token", Status: 201,
			ResponseHeader: jsonHeader, ResponseBody: []byte(`{"token":"t","expires_at":12}`)}, "expires_at"},
		{"a bad query parameter", apispec.Exchange{Method: "GET", Path: "/orgs/acme/actions/runners", Query: "per_page=many", Status: 200,
			ResponseHeader: jsonHeader, ResponseBody: []byte(runnerList)}, `parameter "per_page"`},
		{"a request body missing a required field", apispec.Exchange{Method: "POST", Path: "/orgs/acme/actions/runners/generate-jitconfig",
			RequestHeader: jsonHeader, RequestBody: []byte(`{"name":"r-1","labels":["gpu"]}`), Status: 201,
			ResponseHeader: jsonHeader, ResponseBody: []byte(`{}`)}, `property "runner_group_id" is missing`},
		{"a generic error that is not JSON", apispec.Exchange{Method: "DELETE", Path: "/orgs/acme/actions/runners/7", Status: 404,
			ResponseHeader: http.Header{"Content-Type": {"text/plain"}}, ResponseBody: []byte("404 page not found")}, "not JSON"},
		{"a generic error without a message", apispec.Exchange{Method: "DELETE", Path: "/orgs/acme/actions/runners/7", Status: 502,
			ResponseHeader: jsonHeader, ResponseBody: []byte(`{"documentation_url":"x"}`)}, "no message"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := d.CheckExchange(t.Context(), c.x)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

func TestCheckExchangeRejectsAnUnknownOperation(t *testing.T) {
	d := description(t)
	for _, x := range []apispec.Exchange{
		{Method: "GET", Path: "/orgs/acme/actions/robots", Status: 200},
		{Method: "PATCH", Path: "/orgs/acme/actions/runners", Status: 200}, // a known path, not that method
		{Method: "POST", Path: "/users/someone/actions/runners/registration-token", Status: 201},
	} {
		if _, err := d.CheckExchange(t.Context(), x); !errors.Is(err, apispec.ErrUnknownOperation) {
			t.Errorf("%s: error %v, want ErrUnknownOperation", x, err)
		}
	}
}

// GitHub's own example payloads (octokit/webhooks) conform; dropping a required
// field of the workflow_job does not.
func TestCheckDelivery(t *testing.T) {
	d := description(t)
	files, err := filepath.Glob("../../internal/webhook/testdata/github-webhooks/workflow_job/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example payloads: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.CheckDelivery("workflow_job", raw); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
		var payload map[string]any
		if err := json.Unmarshal(raw, &payload); err != nil {
			t.Fatal(err)
		}
		delete(payload["workflow_job"].(map[string]any), "head_sha")
		broken, _ := json.Marshal(payload)
		if err := d.CheckDelivery("workflow_job", broken); err == nil || !strings.Contains(err.Error(), "head_sha") {
			t.Errorf("%s without head_sha: error %v, want one naming head_sha", filepath.Base(f), err)
		}
	}
	if err := d.CheckDelivery("workflow_job", []byte(`{"action":"exploded"}`)); err == nil {
		t.Error("an unknown action conforms")
	}
}

// ghinstallation posts null as the access-token request's body: taken as no
// body there, where the body is optional, and said so; not where one is required.
func TestCheckExchangeNullBody(t *testing.T) {
	d := description(t)
	m, err := d.CheckExchange(t.Context(), apispec.Exchange{Method: "POST", Path: "/app/installations/9/access_tokens",
		RequestHeader: jsonHeader, RequestBody: []byte("null\n"), Status: 201, ResponseHeader: jsonHeader,
		ResponseBody: []byte(`{"token":"ghs_x","expires_at":"2026-01-01T00:00:00Z"}`)})
	if err != nil || !m.NullBody {
		t.Fatalf("access token with a null body: %+v, %v", m, err)
	}
	_, err = d.CheckExchange(t.Context(), apispec.Exchange{Method: "POST", Path: "/orgs/acme/actions/runners/generate-jitconfig",
		RequestHeader: jsonHeader, RequestBody: []byte("null"), Status: 422, ResponseHeader: jsonHeader,
		ResponseBody: []byte(`{"message":"Invalid request","documentation_url":"x"}`)})
	if err == nil || !strings.Contains(err.Error(), "null") {
		t.Fatalf("jit config with a null body: %v", err)
	}
}
