package githubapi

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/runnerscaler/runnerscaler/internal/secret"
)

// authView is what Auth shows of itself: its ids, and "[REDACTED]" for each
// credential that is set.
type authView struct {
	AppID          int64
	InstallationID int64
	PrivateKey     secret.Value
	Token          secret.Value
}

func (a Auth) view() authView {
	return authView{AppID: a.AppID, InstallationID: a.InstallationID,
		PrivateKey: secret.Value(a.PrivateKey), Token: secret.Value(a.Token)}
}

// String shows the ids, never the credentials.
func (a Auth) String() string {
	v := a.view()
	return fmt.Sprintf("{AppID:%d InstallationID:%d PrivateKey:%s Token:%s}", v.AppID, v.InstallationID, v.PrivateKey, v.Token)
}

// Format renders String for every verb, so that printing an Auth, or a Config
// holding one, with fmt never shows a credential.
func (a Auth) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, a.String()) }

// LogValue shows the ids, never the credentials, to slog.
func (a Auth) LogValue() slog.Value {
	v := a.view()
	return slog.GroupValue(slog.Int64("appID", v.AppID), slog.Int64("installationID", v.InstallationID),
		slog.String("privateKey", v.PrivateKey.String()), slog.String("token", v.Token.String()))
}

// MarshalJSON shows the ids, never the credentials.
func (a Auth) MarshalJSON() ([]byte, error) { return json.Marshal(a.view()) }
