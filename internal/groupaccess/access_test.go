package groupaccess_test

import (
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
)

// TestAdmits: GitHub's rule per visibility — selected: the listed
// repositories, whatever their case; private: any repository the delivery
// does not call public; all, and a visibility unknown here: every repository.
func TestAdmits(t *testing.T) {
	t.Parallel()
	selected := groupaccess.Access{Visibility: groupaccess.Selected, Pages: []groupaccess.Page{
		{Repositories: []string{"acme/one"}}, {Repositories: []string{"acme/Two"}}}}
	for _, tc := range []struct {
		name   string
		access groupaccess.Access
		repo   string
		public bool
		want   bool
		why    string
	}{
		{"selected, listed on the first page", selected, "acme/one", false, true, ""},
		{"selected, listed on a later page, other case", selected, "ACME/two", true, true, ""},
		{"selected, not listed", selected, "acme/three", false, false, "not among the group's selected repositories (2)"},
		{"selected, none listed", groupaccess.Access{Visibility: groupaccess.Selected}, "acme/one", false, false, "selected repositories (0)"},
		{"private, private repository", groupaccess.Access{Visibility: groupaccess.Private}, "acme/one", false, true, ""},
		{"private, public repository", groupaccess.Access{Visibility: groupaccess.Private}, "acme/one", true, false, "private repositories only"},
		{"all", groupaccess.Access{Visibility: groupaccess.All}, "acme/one", true, true, ""},
		{"unknown visibility", groupaccess.Access{Visibility: "internal"}, "acme/one", true, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ok, why := tc.access.Admits(tc.repo, tc.public)
			if ok != tc.want || (tc.why == "" && why != "") || !strings.Contains(why, tc.why) {
				t.Fatalf("Admits(%s, public %v) = %v, %q; want %v, %q", tc.repo, tc.public, ok, why, tc.want, tc.why)
			}
		})
	}
}
