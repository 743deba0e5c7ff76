package runnerfiles

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestJITRoundTrip(t *testing.T) {
	s := Settings{AgentID: 7, AgentName: "p-abcde-0", PoolID: 1, ServerURL: "http://sim", GitHubURL: "http://sim/acme", WorkFolder: "_work", Ephemeral: true}
	c := Credentials{Scheme: "OAuthAccessToken", Data: map[string]string{"token": "simcred_x"}}
	enc, err := EncodeJIT(s, c)
	if err != nil {
		t.Fatal(err)
	}
	gs, gc, err := DecodeJIT(enc)
	if err != nil || gs != s || gc.Scheme != c.Scheme || gc.Token() != "simcred_x" {
		t.Fatalf("DecodeJIT = %+v, %+v, %v; want %+v, %+v", gs, gc, err, s, c)
	}
}

func TestDecodeJITRejectsWhatIsNotAConfig(t *testing.T) {
	incomplete, err := EncodeJIT(Settings{AgentID: 7, ServerURL: "http://sim"}, Credentials{Scheme: "OAuthAccessToken"})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "simcred_secret"
	for name, tc := range map[string]struct{ enc, want string }{
		"not base64":  {"%%" + secret, "not base64"},
		"not JSON":    {base64.StdEncoding.EncodeToString([]byte(`{"` + secret)), "not a runner configuration"},
		"no .runner":  {base64.StdEncoding.EncodeToString([]byte(`{".credentials":"` + secret + `"}`)), "no valid .runner"},
		"bad .runner": {base64.StdEncoding.EncodeToString([]byte(`{".runner":"` + base64.StdEncoding.EncodeToString([]byte("x"+secret)) + `"}`)), ".runner is not JSON"},
		"no token":    {incomplete, "incomplete"},
	} {
		_, _, err := DecodeJIT(tc.enc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error quotes the config: %v", name, err)
		}
	}
}
