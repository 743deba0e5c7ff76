package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/runnerscaler/runnerscaler/internal/teardown"
)

// awsEnv points the AWS SDK at endpoint for Lambda, with the given static
// credentials (none: the SDK finds no credentials anywhere).
func awsEnv(t *testing.T, endpoint, keyID string) {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_LAMBDA": endpoint, "AWS_REGION": "eu-west-1", "AWS_PROFILE": "",
		"AWS_ACCESS_KEY_ID": keyID, "AWS_SECRET_ACCESS_KEY": keyID, "AWS_SESSION_TOKEN": "",
		"AWS_CONFIG_FILE": t.TempDir() + "/none", "AWS_SHARED_CREDENTIALS_FILE": t.TempDir() + "/none",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "",
	} {
		t.Setenv(k, v)
	}
}

// TestDrainStopsAtOnceOnAPermanentError: an AccessDenied or a function that is
// not there ends drain at the first invocation with an error that says so,
// long before its timeout, and not "runners are still left": the sweeper was
// never reached. (Not parallel: it sets the environment the AWS SDK reads.)
func TestDrainStopsAtOnceOnAPermanentError(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		status     int
		want       string
	}{
		{"access denied", "AccessDeniedException", http.StatusForbidden, "need lambda:InvokeFunction on the sweeper's drain alias"},
		{"wrong function", "ResourceNotFoundException", http.StatusNotFound, "no such function or alias"},
		{"bad credentials", "UnrecognizedClientException", http.StatusForbidden, "AWS does not accept your credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("X-Amzn-ErrorType", tc.code)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				fmt.Fprintf(w, `{"Type":"User","message":"refused by the test"}`)
			}))
			t.Cleanup(srv.Close)
			awsEnv(t, srv.URL, "AKIDTEST")
			start := time.Now()
			err := drain(t.Context(), []string{"--function", "stack-sweeper", "--timeout", "1m", "--interval", "10ms"},
				env{getenv: func(string) string { return "" }, stdout: &strings.Builder{}})
			if !errors.Is(err, teardown.ErrCannotInvoke) || errors.Is(err, teardown.ErrNotDrained) ||
				!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.code) {
				t.Fatalf("drain: %v\nwant ErrCannotInvoke naming %s and %q", err, tc.code, tc.want)
			}
			if n := calls.Load(); n != 1 || time.Since(start) > 20*time.Second {
				t.Errorf("%d invocations in %v, want one and no waiting", n, time.Since(start))
			}
		})
	}
}

// TestDrainWithoutCredentialsSaysSo: with no AWS credentials anywhere, drain
// fails before any invocation, naming the lack and how to give them.
func TestDrainWithoutCredentialsSaysSo(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	t.Cleanup(srv.Close)
	awsEnv(t, srv.URL, "")
	err := drain(t.Context(), []string{"--function", "stack-sweeper", "--timeout", "1m"},
		env{getenv: func(string) string { return "" }, stdout: &strings.Builder{}})
	if !errors.Is(err, teardown.ErrCannotInvoke) || !strings.Contains(err.Error(), "no AWS credentials") {
		t.Fatalf("drain: %v, want no AWS credentials named", err)
	}
	if calls.Load() != 0 {
		t.Errorf("%d invocations, want none", calls.Load())
	}
}

// TestCannotInvokeClassifies: a name that does not resolve is permanent, a
// throttle, a 5xx and a DNS time-out may pass on a later round.
func TestCannotInvokeClassifies(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error {
		return &smithy.OperationError{ServiceID: "Lambda", OperationName: "Invoke", Err: err}
	}
	for _, tc := range []struct {
		err       error
		permanent bool
	}{
		{wrap(&net.DNSError{Name: "lambda.eu-nowhere-1.amazonaws.com", Err: "no such host", IsNotFound: true}), true},
		{wrap(&net.DNSError{Name: "lambda.eu-west-1.amazonaws.com", Err: "i/o timeout", IsTimeout: true}), false},
		{wrap(&smithy.GenericAPIError{Code: "TooManyRequestsException"}), false},
		{wrap(&smithy.GenericAPIError{Code: "ServiceException"}), false},
		{wrap(&smithy.GenericAPIError{Code: "AccessDeniedException"}), true},
		{nil, false},
	} {
		if got := cannotInvoke(tc.err) != ""; got != tc.permanent {
			t.Errorf("%v: permanent %v, want %v", tc.err, got, tc.permanent)
		}
	}
}
