package githubapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
)

// TestAuthPrintsNoCredential: an Auth, and a Config holding one, printed by
// fmt, slog or encoding/json shows its ids and never its private key or token.
func TestAuthPrintsNoCredential(t *testing.T) {
	t.Parallel()
	const key, token = "-----BEGIN RSA PRIVATE KEY-----\nMIIsecretkey", "ghp_secrettoken"
	auth := githubapi.Auth{AppID: 7, InstallationID: 9, PrivateKey: []byte(key), Token: token}
	cfg := githubapi.Config{BaseURL: "https://api.github.com/", Auth: auth}
	var out []string
	for _, v := range []any{auth, &auth, cfg, &cfg} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			out = append(out, fmt.Sprintf(verb, v))
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(j))
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "auth", v)
		slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "auth", v)
		out = append(out, buf.String())
	}
	for _, s := range out {
		if strings.Contains(s, "secretkey") || strings.Contains(s, "secrettoken") {
			t.Fatalf("a credential printed: %s", s)
		}
	}
	if s := fmt.Sprintf("%+v", auth); !strings.Contains(s, "AppID:7") || !strings.Contains(s, "[REDACTED]") {
		t.Fatalf("%%+v of an Auth = %s, want its ids and [REDACTED]", s)
	}
}
