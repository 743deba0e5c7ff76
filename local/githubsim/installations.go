package githubsim

import (
	"net/http"
	"strings"
)

// Installations of the App on accounts, as GitHub has them: an App installed on
// several organizations has one installation per organization, and an
// installation token acts only on its own account's resources.
//
//	GET /orgs/{org}/installation               (App JWT) the App's installation on an organization
//	GET /repos/{owner}/{repo}/installation     (App JWT) the installation that covers a repository
//
// Options.Accounts maps an installation id to the account (organization login) it
// is installed on. An installation listed there gets 403 "Resource not accessible
// by integration" for another account's runners and for every enterprise
// endpoint — GitHub Apps cannot manage enterprise runners, only a classic PAT can.
// Installations not listed in Accounts act on every scope (the simulator's
// original, single-installation behaviour).

func (s *Server) installationRoutes() {
	s.handle("GET /orgs/{org}/installation", s.findInstallation)
	s.handle("GET /repos/{owner}/{repo}/installation", s.findInstallation)
}

// findInstallation answers the installation on the request's account, or 404.
func (s *Server) findInstallation(w http.ResponseWriter, r *http.Request) {
	if err := s.verifyJWT(r.Header.Get("Authorization")); err != nil {
		writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded: "+err.Error())
		return
	}
	account := r.PathValue("org")
	if account == "" {
		account = r.PathValue("owner")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, acc := range s.opts.Accounts {
		if strings.EqualFold(acc, account) {
			writeJSON(w, http.StatusOK, s.installationJSON(id, acc)) // payloads.go
			return
		}
	}
	writeError(w, http.StatusNotFound, "Not Found")
}

// allowed reports whether identity may act on the request's scope (see above).
func (s *Server) allowed(identity string, installation int64, r *http.Request) bool {
	if !strings.HasPrefix(identity, "installation/") {
		return true // a PAT: its owner's permissions, enterprise included
	}
	s.mu.Lock()
	account, restricted := s.opts.Accounts[installation]
	s.mu.Unlock()
	if !restricted || publicRepository(r) {
		return true
	}
	switch {
	case r.PathValue("enterprise") != "":
		return false
	case r.PathValue("org") != "":
		return strings.EqualFold(r.PathValue("org"), account)
	case r.PathValue("owner") != "":
		return strings.EqualFold(r.PathValue("owner"), account)
	}
	return true
}

// Reinstall moves the App's installation from old to a new id on the same
// account, as uninstalling and installing the App again does: old's tokens stop
// working at once.
func (s *Server) Reinstall(old, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	accounts := make(map[int64]string, len(s.opts.Accounts))
	for k, v := range s.opts.Accounts {
		accounts[k] = v
	}
	accounts[id] = accounts[old]
	delete(accounts, old)
	s.opts.Accounts = accounts
	for tok, it := range s.tokens {
		if it.installation == old {
			delete(s.tokens, tok)
		}
	}
}
