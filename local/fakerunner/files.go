package fakerunner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/runnerscaler/runnerscaler/local/runnerfiles"
)

// errNotConfigured: no .runner in the root directory.
var errNotConfigured = errors.New("not configured. Run config.(sh/cmd) to configure the runner")

// readConfig reads .runner and .credentials from root.
func readConfig(root string) (runnerfiles.Settings, runnerfiles.Credentials, error) {
	var s runnerfiles.Settings
	var c runnerfiles.Credentials
	raw, err := os.ReadFile(filepath.Join(root, runnerfiles.SettingsFile))
	if errors.Is(err, os.ErrNotExist) {
		return s, c, errNotConfigured
	}
	if err != nil {
		return s, c, err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, c, fmt.Errorf("reading %s: %w", runnerfiles.SettingsFile, err)
	}
	raw, err = os.ReadFile(filepath.Join(root, runnerfiles.CredentialsFile))
	if err != nil {
		return s, c, fmt.Errorf("reading %s: %w", runnerfiles.CredentialsFile, err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return s, c, fmt.Errorf("reading %s: %w", runnerfiles.CredentialsFile, err)
	}
	if !runnerfiles.Complete(s, c) {
		return s, c, fmt.Errorf("%s or %s is incomplete: re-configure the runner", runnerfiles.SettingsFile, runnerfiles.CredentialsFile)
	}
	return s, c, nil
}

// writeConfig writes .runner and .credentials (the latter readable by the runner's
// user only) into root.
func writeConfig(root string, s runnerfiles.Settings, c runnerfiles.Credentials) error {
	for _, f := range []struct {
		name string
		v    any
		mode os.FileMode
	}{{runnerfiles.SettingsFile, s, 0o644}, {runnerfiles.CredentialsFile, c, 0o600}} {
		raw, err := json.MarshalIndent(f.v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, f.name), append(raw, '\n'), f.mode); err != nil {
			return fmt.Errorf("writing %s: %w", f.name, err)
		}
	}
	return nil
}

// rootDir is the runner's root directory for the program run as argv0: the
// directory of config.sh / run.sh, the parent of bin/ for bin/Runner.*. Symlinks
// are not resolved, so one binary can serve every name.
func rootDir(argv0 string) (string, error) {
	path := argv0
	if filepath.Base(path) == path { // run through PATH
		exe, err := os.Executable()
		if err != nil {
			return "", err
		}
		path = exe
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(abs)
	if filepath.Base(dir) == "bin" && (filepath.Base(abs) == listenerName || filepath.Base(abs) == workerName) {
		dir = filepath.Dir(dir)
	}
	return dir, nil
}
