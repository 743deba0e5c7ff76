package sweeper_test

import (
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TABLE_NAME": "t", "POOLS_CONFIG": "p"}, ""},
		{map[string]string{"POOLS_CONFIG": "p"}, "TABLE_NAME is required"},
		{map[string]string{"TABLE_NAME": "t"}, "POOLS_CONFIG is required"},
		{map[string]string{"TABLE_NAME": "t", "POOLS_CONFIG": "p", "LEASE_SECONDS": "2"}, `LEASE_SECONDS "2" must be`},
		{map[string]string{"TABLE_NAME": "t", "POOLS_CONFIG": "p", "SWEEP_PARALLELISM": "x"}, `SWEEP_PARALLELISM "x" must be`},
		{map[string]string{"TABLE_NAME": "t", "POOLS_CONFIG": "p", "DYNAMODB_ENDPOINT": "db:8000"}, `DYNAMODB_ENDPOINT "db:8000" is not a URL`},
	}
	for _, tc := range cases {
		c, err := sweeper.ConfigFromEnv(func(k string) string { return tc.env[k] })
		if tc.want == "" && (err != nil || c.Lease != 30*time.Second || c.Parallelism != 4) ||
			tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("env %v: config %+v, error %v; want %q", tc.env, c, err, tc.want)
		}
	}
}
