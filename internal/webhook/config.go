package webhook

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/runnerscaler/runnerscaler/internal/secret"
)

// Config is the webhook function's environment. Its secret is a secret.Value:
// printing a Config, by any means, does not show it.
type Config struct {
	// TableName is the DynamoDB table (TABLE_NAME).
	TableName string
	// PoolsConfig is the path of the pools file (POOLS_CONFIG).
	PoolsConfig string
	// WebhookSecretARN names the Secrets Manager secret holding the webhook secret (WEBHOOK_SECRET_ARN).
	WebhookSecretARN string
	// WebhookSecret is the secret itself, for the local stack only (WEBHOOK_SECRET).
	WebhookSecret secret.Value
	// DynamoDBEndpoint replaces the AWS endpoint, for the local stack (DYNAMODB_ENDPOINT).
	DynamoDBEndpoint string
	// SweeperFunctionName is nudged after a queued job is recorded; empty disables nudges (SWEEPER_FUNCTION_NAME).
	SweeperFunctionName string
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv in main) and validates it.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		TableName:           getenv("TABLE_NAME"),
		PoolsConfig:         getenv("POOLS_CONFIG"),
		WebhookSecretARN:    getenv("WEBHOOK_SECRET_ARN"),
		WebhookSecret:       secret.Value(getenv("WEBHOOK_SECRET")),
		DynamoDBEndpoint:    getenv("DYNAMODB_ENDPOINT"),
		SweeperFunctionName: getenv("SWEEPER_FUNCTION_NAME"),
	}
	return c, c.Validate()
}

// Validate reports every missing or contradictory setting at once, by variable name.
func (c Config) Validate() error {
	var errs []error
	if c.TableName == "" {
		errs = append(errs, errors.New("TABLE_NAME is required"))
	}
	if c.PoolsConfig == "" {
		errs = append(errs, errors.New("POOLS_CONFIG is required (path of the pools YAML file)"))
	}
	switch {
	case c.WebhookSecretARN == "" && c.WebhookSecret == "":
		errs = append(errs, errors.New("WEBHOOK_SECRET_ARN is required (or WEBHOOK_SECRET on the local stack)"))
	case c.WebhookSecretARN != "" && c.WebhookSecret != "":
		errs = append(errs, errors.New("set only one of WEBHOOK_SECRET_ARN and WEBHOOK_SECRET"))
	case c.WebhookSecretARN != "" && !strings.HasPrefix(c.WebhookSecretARN, "arn:"):
		errs = append(errs, fmt.Errorf("WEBHOOK_SECRET_ARN %q is not an ARN", c.WebhookSecretARN))
	}
	if c.DynamoDBEndpoint != "" && !strings.HasPrefix(c.DynamoDBEndpoint, "http") {
		errs = append(errs, fmt.Errorf("DYNAMODB_ENDPOINT %q is not a URL", c.DynamoDBEndpoint))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webhook configuration: %w", err)
	}
	return nil
}

// LogValue names the settings, and whether the secret is set.
func (c Config) LogValue() slog.Value {
	secret := "unset"
	if c.WebhookSecret != "" {
		secret = c.WebhookSecret.String()
	}
	return slog.GroupValue(slog.String("table", c.TableName), slog.String("pools", c.PoolsConfig),
		slog.String("secretArn", c.WebhookSecretARN), slog.String("secret", secret),
		slog.String("dynamodbEndpoint", c.DynamoDBEndpoint), slog.String("sweeper", c.SweeperFunctionName))
}

// String is LogValue's rendering.
func (c Config) String() string { return c.LogValue().String() }
