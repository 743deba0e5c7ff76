// Package secret holds a credential — a private key, a token, a webhook
// secret — in a configuration struct so that printing the struct shows
// "[REDACTED]" in its place: fmt's verbs (%v, %+v, %#v, %s, %q, ...), slog
// (either handler) and encoding/json all render a Value that way. Only Reveal
// gives the credential, to the code that uses it.
//
// fmt does not call methods on unexported struct fields; keep a Value in an
// exported field.
package secret

import (
	"fmt"
	"io"
	"log/slog"
)

// Value is a credential. Its zero value is "not set".
type Value string

// Redacted is how every printer renders a Value that is set.
const Redacted = "[REDACTED]"

// Reveal returns the credential itself.
func (v Value) Reveal() string { return string(v) }

// String is Redacted, or "" when v is not set.
func (v Value) String() string {
	if v == "" {
		return ""
	}
	return Redacted
}

// GoString is String, for %#v.
func (v Value) GoString() string { return v.String() }

// Format renders String for every verb and flag.
func (v Value) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, v.String()) }

// LogValue is String, for slog.
func (v Value) LogValue() slog.Value { return slog.StringValue(v.String()) }

// MarshalJSON is String as a JSON string.
func (v Value) MarshalJSON() ([]byte, error) { return []byte(`"` + v.String() + `"`), nil }

// MarshalText is String, for encoders that use encoding.TextMarshaler.
func (v Value) MarshalText() ([]byte, error) { return []byte(v.String()), nil }
