package fakerunner

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The runner's files in its root directory, as actions/runner names them.
const (
	settingsFile    = ".runner"
	credentialsFile = ".credentials"
)

// settings is the .runner file (the fields of actions/runner's RunnerSettings
// the simulator fills). ServerURL is where the runner's agent talks.
type settings struct {
	AgentID    int64  `json:"agentId"`
	AgentName  string `json:"agentName"`
	PoolID     int64  `json:"poolId"`
	ServerURL  string `json:"serverUrl"`
	GitHubURL  string `json:"gitHubUrl"`
	WorkFolder string `json:"workFolder"`
	Ephemeral  bool   `json:"ephemeral,omitempty"`
}

// credentials is the .credentials file; the simulator's scheme is a bearer token
// (actions/runner's OAuthAccessToken).
type credentials struct {
	Scheme string            `json:"scheme"`
	Data   map[string]string `json:"data"`
}

func (c credentials) token() string { return c.Data["token"] }

// errNotConfigured: no .runner in the root directory.
var errNotConfigured = errors.New("not configured. Run config.(sh/cmd) to configure the runner")

// readConfig reads .runner and .credentials from root.
func readConfig(root string) (settings, credentials, error) {
	var s settings
	var c credentials
	raw, err := os.ReadFile(filepath.Join(root, settingsFile))
	if errors.Is(err, os.ErrNotExist) {
		return s, c, errNotConfigured
	}
	if err != nil {
		return s, c, err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, c, fmt.Errorf("reading %s: %w", settingsFile, err)
	}
	raw, err = os.ReadFile(filepath.Join(root, credentialsFile))
	if err != nil {
		return s, c, fmt.Errorf("reading %s: %w", credentialsFile, err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return s, c, fmt.Errorf("reading %s: %w", credentialsFile, err)
	}
	if s.ServerURL == "" || s.AgentID == 0 || c.token() == "" {
		return s, c, fmt.Errorf("%s or %s is incomplete: re-configure the runner", settingsFile, credentialsFile)
	}
	return s, c, nil
}

// writeConfig writes .runner and .credentials (the latter readable by the runner's
// user only) into root.
func writeConfig(root string, s settings, c credentials) error {
	for _, f := range []struct {
		name string
		v    any
		mode os.FileMode
	}{{settingsFile, s, 0o644}, {credentialsFile, c, 0o600}} {
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

// decodeJIT reads a JIT config: base64 of a JSON object mapping file names to
// base64 of their content.
func decodeJIT(enc string) (settings, credentials, error) {
	var s settings
	var c credentials
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return s, c, fmt.Errorf("the JIT config is not base64: %w", err)
	}
	var files map[string]string
	if err := json.Unmarshal(raw, &files); err != nil {
		return s, c, fmt.Errorf("the JIT config is not a runner configuration: %w", err)
	}
	for name, dst := range map[string]any{settingsFile: &s, credentialsFile: &c} {
		content, err := base64.StdEncoding.DecodeString(files[name])
		if err != nil || len(content) == 0 {
			return s, c, fmt.Errorf("the JIT config has no valid %s", name)
		}
		if err := json.Unmarshal(content, dst); err != nil {
			return s, c, fmt.Errorf("the JIT config's %s: %w", name, err)
		}
	}
	if s.ServerURL == "" || s.AgentID == 0 || c.token() == "" {
		return s, c, errors.New("the JIT config is incomplete")
	}
	return s, c, nil
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
