// Package runnerfiles is the runner configuration the GitHub simulator issues and
// the fake runner keeps: the files actions/runner writes into its root directory
// once configured (.runner, .credentials), and the JIT config that carries them.
// Only the fields the simulator fills are defined.
package runnerfiles

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// The runner's files in its root directory, as actions/runner names them.
const (
	SettingsFile    = ".runner"
	CredentialsFile = ".credentials"
)

// Settings is the .runner file: the fields of actions/runner's RunnerSettings
// that matter here. ServerURL is where the runner's agent talks (the simulator,
// for its /_runner/ paths); GitHubURL is the URL it was configured for.
type Settings struct {
	AgentID    int64  `json:"agentId"`
	AgentName  string `json:"agentName"`
	PoolID     int64  `json:"poolId"`
	ServerURL  string `json:"serverUrl"`
	GitHubURL  string `json:"gitHubUrl"`
	WorkFolder string `json:"workFolder"`
	Ephemeral  bool   `json:"ephemeral,omitempty"`
}

// Credentials is the .credentials file. The simulator's credential is a bearer
// token, actions/runner's OAuthAccessToken scheme; the real runner's usual OAuth
// scheme signs tokens with the key of .credentials_rsaparams instead.
type Credentials struct {
	Scheme string            `json:"scheme"`
	Data   map[string]string `json:"data"`
}

// Token is the bearer token ("" when there is none).
func (c Credentials) Token() string { return c.Data["token"] }

// Complete reports whether s and c are enough for a runner to connect.
func Complete(s Settings, c Credentials) bool {
	return s.ServerURL != "" && s.AgentID != 0 && c.Token() != ""
}

// EncodeJIT returns the JIT config of s and c. Like GitHub's, it is base64 of a
// JSON object mapping the runner's files to base64 of their content.
func EncodeJIT(s Settings, c Credentials) (string, error) {
	enc := make(map[string]string, 2)
	for name, v := range map[string]any{SettingsFile: s, CredentialsFile: c} {
		raw, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("encoding %s: %w", name, err)
		}
		enc[name] = base64.StdEncoding.EncodeToString(raw)
	}
	raw, err := json.Marshal(enc)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(raw), nil
}

// DecodeJIT reads a JIT config made by EncodeJIT; its errors never quote it.
func DecodeJIT(enc string) (Settings, Credentials, error) {
	var s Settings
	var c Credentials
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return s, c, errors.New("the JIT config is not base64")
	}
	var files map[string]string
	if err := json.Unmarshal(raw, &files); err != nil {
		return s, c, errors.New("the JIT config is not a runner configuration")
	}
	for _, f := range []struct {
		name string
		dst  any
	}{{SettingsFile, &s}, {CredentialsFile, &c}} {
		content, err := base64.StdEncoding.DecodeString(files[f.name])
		if err != nil || len(content) == 0 {
			return s, c, fmt.Errorf("the JIT config has no valid %s", f.name)
		}
		if err := json.Unmarshal(content, f.dst); err != nil {
			return s, c, fmt.Errorf("the JIT config's %s is not JSON", f.name)
		}
	}
	if !Complete(s, c) {
		return s, c, errors.New("the JIT config is incomplete")
	}
	return s, c, nil
}
