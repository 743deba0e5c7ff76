package secret_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/secret"
)

type config struct {
	Name  string
	Key   secret.Value
	Inner struct{ Token secret.Value }
	Ptr   *secret.Value
}

// TestEveryPrinterRedacts: a Value, alone or in a struct, by value or by
// pointer, never prints its credential.
func TestEveryPrinterRedacts(t *testing.T) {
	t.Parallel()
	tok := secret.Value("tok-SECRET")
	c := config{Name: "n", Key: "key-SECRET", Ptr: &tok}
	c.Inner.Token = "inner-SECRET"
	for _, v := range []any{c, &c, c.Key, &c.Key} {
		var js, text bytes.Buffer
		slog.New(slog.NewJSONHandler(&js, nil)).Info("m", "v", v)
		slog.New(slog.NewTextHandler(&text, nil)).Info("m", "v", v)
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outs := []string{js.String(), text.String(), string(raw)}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%10.3s"} {
			outs = append(outs, fmt.Sprintf(verb, v))
		}
		outs = append(outs, fmt.Sprint(v), fmt.Sprintln(v))
		for _, out := range outs {
			if strings.Contains(out, "SECRET") || strings.Contains(out, "534543524554") { // in hex too
				t.Errorf("%T printed its secret: %s", v, out)
			}
			if !strings.Contains(out, secret.Redacted) {
				t.Errorf("%T printed without %s: %s", v, secret.Redacted, out)
			}
		}
	}
}

// TestRevealAndUnset: Reveal gives the credential; an unset Value prints empty.
func TestRevealAndUnset(t *testing.T) {
	t.Parallel()
	if got := secret.Value("k").Reveal(); got != "k" {
		t.Fatalf("Reveal = %q", got)
	}
	var unset secret.Value
	raw, err := json.Marshal(unset)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprintf("%v", unset); s != "" || string(raw) != `""` {
		t.Fatalf("unset prints %q and %s, want empty", s, raw)
	}
}
