package sweeper

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Config is the sweeper function's environment.
type Config struct {
	// TableName is the DynamoDB table (TABLE_NAME).
	TableName string
	// PoolsConfig is the path of the pools file (POOLS_CONFIG).
	PoolsConfig string
	// DynamoDBEndpoint replaces the AWS endpoint, for the local stack (DYNAMODB_ENDPOINT).
	DynamoDBEndpoint string
	// Lease is how long a pool's lease lasts between renewals (LEASE_SECONDS, default 30);
	// keep it well under the function's timeout.
	Lease time.Duration
	// Parallelism bounds pools swept at once (SWEEP_PARALLELISM, default 4).
	Parallelism int
}

// ConfigFromEnv reads the configuration through getenv and validates it.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		TableName: getenv("TABLE_NAME"), PoolsConfig: getenv("POOLS_CONFIG"), DynamoDBEndpoint: getenv("DYNAMODB_ENDPOINT"),
		Lease: 30 * time.Second, Parallelism: 4,
	}
	var errs []error
	if v := getenv("LEASE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 5 || n > 600 {
			errs = append(errs, fmt.Errorf("LEASE_SECONDS %q must be a whole number of seconds between 5 and 600", v))
		}
		c.Lease = time.Duration(n) * time.Second
	}
	if v := getenv("SWEEP_PARALLELISM"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			errs = append(errs, fmt.Errorf("SWEEP_PARALLELISM %q must be between 1 and 64", v))
		}
		c.Parallelism = n
	}
	if err := errors.Join(append(errs, c.Validate())...); err != nil {
		return c, fmt.Errorf("sweeper configuration: %w", err)
	}
	return c, nil
}

// Validate reports missing or invalid settings by variable name.
func (c Config) Validate() error {
	var errs []error
	if c.TableName == "" {
		errs = append(errs, errors.New("TABLE_NAME is required"))
	}
	if c.PoolsConfig == "" {
		errs = append(errs, errors.New("POOLS_CONFIG is required (path of the pools YAML file)"))
	}
	if c.DynamoDBEndpoint != "" && !strings.HasPrefix(c.DynamoDBEndpoint, "http") {
		errs = append(errs, fmt.Errorf("DYNAMODB_ENDPOINT %q is not a URL", c.DynamoDBEndpoint))
	}
	return errors.Join(errs...)
}
