package scope_test

import (
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// TestValidateRejectsNamesGitHubCannotHave: a name outside GitHub's character set
// (one that could change the REST path it is put into) fails Validate, and the
// error names the field and the bad value.
func TestValidateRejectsNamesGitHubCannotHave(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		s    scope.Scope
		want string // in the error: the field and the value
	}{
		"query in a repository name":    {scope.Scope{Repository: "victim/repo?"}, `repository name "repo?"`},
		"fragment in a repository":      {scope.Scope{Repository: "victim/repo#x"}, `repository name "repo#x"`},
		"dot-dot repository":            {scope.Scope{Repository: "victim/.."}, `repository name ".."`},
		"dot repository":                {scope.Scope{Repository: "victim/."}, `repository name "."`},
		"encoded slash in a repo":       {scope.Scope{Repository: "victim/a%2Fb"}, `repository name "a%2Fb"`},
		"long repository name":          {scope.Scope{Repository: "o/" + strings.Repeat("r", 101)}, "repository name"},
		"dot-dot owner":                 {scope.Scope{Repository: "../x"}, `repository owner ".."`},
		"owner with a space":            {scope.Scope{Repository: "a b/x"}, `repository owner "a b"`},
		"owner with two underscores":    {scope.Scope{Repository: "a_b_c/x"}, `repository owner "a_b_c"`},
		"owner with an empty shortcode": {scope.Scope{Repository: "octocat_/x"}, `repository owner "octocat_"`},
		"organization with a query":     {scope.Scope{Organization: "acme?x=1"}, `organization "acme?x=1"`},
		"organization with a slash":     {scope.Scope{Organization: "acme/x"}, `organization "acme/x"`},
		"organization double hyphen":    {scope.Scope{Organization: "ac--me"}, `organization "ac--me"`},
		"organization leading hyphen":   {scope.Scope{Organization: "-acme"}, `organization "-acme"`},
		"organization trailing hyphen":  {scope.Scope{Organization: "acme-"}, `organization "acme-"`},
		"organization underscore":       {scope.Scope{Organization: "ac_me"}, `organization "ac_me"`},
		"long organization":             {scope.Scope{Organization: strings.Repeat("a", 40)}, "organization"},
		"organization with ESC":         {scope.Scope{Organization: "acme\x1b[2J"}, `organization "acme\x1b[2J"`},
		"enterprise with a slash":       {scope.Scope{Enterprise: "corp/../x"}, `enterprise "corp/../x"`},
		"enterprise with a dot":         {scope.Scope{Enterprise: "corp.x"}, `enterprise "corp.x"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := c.s.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate(%+v) = %v, want an error naming %s", c.s, err, c.want)
			}
		})
	}
}

// TestValidateAcceptsGitHubNames: names GitHub allows stay valid.
func TestValidateAcceptsGitHubNames(t *testing.T) {
	t.Parallel()
	for _, s := range []scope.Scope{
		{Organization: "acme"}, {Organization: "Octo-Coders-2"}, {Organization: "a"}, {Organization: strings.Repeat("a", 39)},
		{Repository: "acme/app"}, {Repository: "octo-org/my_repo.go-v2"}, {Repository: "acme/.github"}, {Repository: "acme/..."},
		{Repository: "acme/" + strings.Repeat("r", 100)}, {Repository: "acme/_"},
		{Repository: "octocat_acme/app"}, {Repository: "mona-lisa_octo2/app"},
		{Enterprise: "acme-corp"}, {Enterprise: "Big2"},
	} {
		if err := s.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", s, err)
		}
	}
}

// TestParseRejectsWhatValidateRejects: a scope read back from a runner's
// annotation is held to the same rules.
func TestParseRejectsWhatValidateRejects(t *testing.T) {
	t.Parallel()
	if _, err := scope.Parse("repository/victim/repo?"); err == nil || !strings.Contains(err.Error(), `repository name "repo?"`) {
		t.Fatalf("Parse: %v, want the bad repository name", err)
	}
	s, err := scope.Parse("repository/acme/app")
	if err != nil || s.Repository != "acme/app" {
		t.Fatalf("Parse = %+v, %v; want acme/app", s, err)
	}
}
