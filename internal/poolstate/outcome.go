package poolstate

import (
	"time"
	"unicode/utf8"
)

// MaxErrors is how many failed sweeps a status item keeps.
const MaxErrors = 5

// maxErrorLength caps one kept error message, in bytes.
const maxErrorLength = 500

// SweepError is one failed sweep, as the status item keeps it for operators.
type SweepError struct {
	At    time.Time `dynamodbav:"at"`
	Error string    `dynamodbav:"error"`
}

// RecordOutcome records how the sweep at now ended: Failed says whether err is
// set, and a failure joins Errors, which keeps the latest MaxErrors, oldest first,
// each message cut to 500 bytes.
func (st *Status) RecordOutcome(now time.Time, err error) {
	st.Failed = err != nil
	if err == nil {
		return
	}
	msg := err.Error()
	if len(msg) > maxErrorLength {
		msg = msg[:maxErrorLength]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
		msg += "…"
	}
	st.Errors = append(st.Errors, SweepError{At: now, Error: msg})
	if n := len(st.Errors); n > MaxErrors {
		st.Errors = append([]SweepError(nil), st.Errors[n-MaxErrors:]...)
	}
}
