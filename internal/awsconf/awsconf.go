// Package awsconf builds the AWS clients the functions use and fetches their
// secrets. Values come from the function's environment (read by the wiring); the
// local stack overrides the DynamoDB endpoint and passes secrets in plain text.
package awsconf

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// Load returns the AWS configuration of the environment (in Lambda: the function's
// role and region), with opts (the CLI's region and logger).
func Load(ctx context.Context, opts ...func(*config.LoadOptions) error) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS config: %w", err)
	}
	return cfg, nil
}

// DynamoDB returns a client; a non-empty endpoint (the local stack's dynalite)
// replaces the AWS one.
func DynamoDB(cfg aws.Config, endpoint string) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}

// SecretsAPI is the part of the Secrets Manager client used here.
type SecretsAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Secret returns the current value of the secret arn (string or binary). Call it
// once per container and keep the value: it is not cached here. Errors name the
// secret, never its value.
func Secret(ctx context.Context, sm SecretsAPI, arn string) ([]byte, error) {
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return nil, fmt.Errorf("reading secret %s: %w", arn, err)
	}
	switch {
	case out.SecretString != nil && *out.SecretString != "":
		return []byte(*out.SecretString), nil
	case len(out.SecretBinary) > 0:
		return out.SecretBinary, nil
	}
	return nil, fmt.Errorf("secret %s: %w", arn, errEmptySecret)
}

var errEmptySecret = errors.New("is empty: put the value in it (see docs/getting-started.md, step 6)")
