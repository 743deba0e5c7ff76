package sweeper

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/secret"
)

// DefaultRunnerListMaxAge is Config.RunnerListMaxAge unless set: short next
// to a sweep's work, long enough that the pools of a scope swept in one
// invocation read its list a few times instead of once each.
const DefaultRunnerListMaxAge = 10 * time.Second

// Config is the sweeper function's environment. Its credentials are
// secret.Values: printing a Config, by any means, shows none of them.
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
	// IdleConfirmation: a runner that may have taken a job is removed only after
	// GitHub listed it idle on two reads at least this far apart
	// (IDLE_CONFIRMATION_SECONDS, default 90; reconcile.DefaultIdleConfirmation).
	IdleConfirmation time.Duration
	// RunnerListMaxAge: a scope's runner list read for one pool serves the
	// other pools of the scope this long (RUNNER_LIST_MAX_AGE_SECONDS, default
	// DefaultRunnerListMaxAge, 0 to 60; 0: each pool reads its own).
	RunnerListMaxAge time.Duration

	// Kubeconfig is the cluster's kubeconfig on the local stack (KUBECONFIG).
	Kubeconfig string
	// EKSCluster names the EKS cluster (EKS_CLUSTER_NAME); its endpoint and CA come
	// from eks:DescribeCluster unless EKS_ENDPOINT and EKS_CA (base64 PEM) are set.
	EKSCluster, EKSEndpoint, EKSCA string

	// GitHubURL is the REST API root (GITHUB_URL, default https://api.github.com/;
	// GitHub Enterprise Server: https://HOST/api/v3/).
	GitHubURL string
	// RunnerGitHubURL is where runners register (RUNNER_GITHUB_URL; derived from GitHubURL).
	RunnerGitHubURL string
	// AppID is the GitHub App (GITHUB_APP_ID). InstallationID
	// (GITHUB_APP_INSTALLATION_ID) is optional: when set, that one installation
	// serves every organization and repository pool; when not, each pool's
	// installation is looked up from its organization or repository.
	AppID, InstallationID int64
	// PrivateKeyARN names the Secrets Manager secret with the App's private key
	// (GITHUB_APP_PRIVATE_KEY_ARN); PrivateKey is the PEM itself, for the local stack
	// only (GITHUB_APP_PRIVATE_KEY).
	PrivateKeyARN string
	PrivateKey    secret.Value
	// Token is a classic personal access token (GITHUB_TOKEN; from Secrets Manager:
	// GITHUB_TOKEN_ARN). With an App it serves the enterprise pools only (GitHub Apps
	// cannot manage enterprise runners); without one, every pool.
	Token    secret.Value
	TokenARN string
}

// ConfigFromEnv reads the configuration through getenv and validates it.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		TableName: getenv("TABLE_NAME"), PoolsConfig: getenv("POOLS_CONFIG"), DynamoDBEndpoint: getenv("DYNAMODB_ENDPOINT"),
		RunnerListMaxAge: DefaultRunnerListMaxAge, Kubeconfig: getenv("KUBECONFIG"),
		EKSCluster: getenv("EKS_CLUSTER_NAME"), EKSEndpoint: getenv("EKS_ENDPOINT"), EKSCA: getenv("EKS_CA"),
		GitHubURL: getenv("GITHUB_URL"), RunnerGitHubURL: getenv("RUNNER_GITHUB_URL"),
		PrivateKeyARN: getenv("GITHUB_APP_PRIVATE_KEY_ARN"), PrivateKey: secret.Value(getenv("GITHUB_APP_PRIVATE_KEY")),
		Token:    secret.Value(getenv("GITHUB_TOKEN")),
		TokenARN: getenv("GITHUB_TOKEN_ARN"),
	}
	var errs []error
	for name, dst := range map[string]*int64{"GITHUB_APP_ID": &c.AppID, "GITHUB_APP_INSTALLATION_ID": &c.InstallationID} {
		if v := getenv(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("%s %q must be a positive number", name, v))
			}
			*dst = n
		}
	}
	if v := getenv("LEASE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 5 || n > 600 {
			errs = append(errs, fmt.Errorf("LEASE_SECONDS %q must be a whole number of seconds between 5 and 600", v))
		}
		c.Lease = time.Duration(n) * time.Second
	}
	if v := getenv("IDLE_CONFIRMATION_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3600 {
			errs = append(errs, fmt.Errorf("IDLE_CONFIRMATION_SECONDS %q must be a whole number of seconds between 1 and 3600", v))
		}
		c.IdleConfirmation = time.Duration(n) * time.Second
	}
	if v := getenv("RUNNER_LIST_MAX_AGE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 60 {
			errs = append(errs, fmt.Errorf("RUNNER_LIST_MAX_AGE_SECONDS %q must be a whole number of seconds between 0 and 60", v))
		}
		c.RunnerListMaxAge = time.Duration(n) * time.Second
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

// Validate gives the settings left zero their defaults, then reports missing
// or invalid settings by variable name.
func (c *Config) Validate() error {
	c.defaults()
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
	if (c.Kubeconfig == "") == (c.EKSCluster == "") {
		errs = append(errs, errors.New("set exactly one of EKS_CLUSTER_NAME and KUBECONFIG (local stack): the cluster the runners live in"))
	}
	if (c.EKSEndpoint == "") != (c.EKSCA == "") {
		errs = append(errs, errors.New("set both EKS_ENDPOINT and EKS_CA, or neither (then eks:DescribeCluster finds them)"))
	}
	return errors.Join(append(errs, c.validateGitHub())...)
}

// defaults gives each setting left zero its default. RunnerListMaxAge has
// none here: zero is a setting (each pool reads its own list), so
// ConfigFromEnv starts it at DefaultRunnerListMaxAge.
func (c *Config) defaults() {
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.Parallelism == 0 {
		c.Parallelism = 4
	}
	if c.GitHubURL == "" {
		c.GitHubURL = "https://api.github.com/"
	}
	if c.RunnerGitHubURL == "" {
		c.RunnerGitHubURL = RunnerURL(c.GitHubURL)
	}
}

// validateGitHub: an App (id and one source of its key; the installation id is
// optional), a token (from one source), or both.
func (c Config) validateGitHub() error {
	app := c.AppID != 0 || c.InstallationID != 0 || c.PrivateKeyARN != "" || c.PrivateKey != ""
	token := c.Token != "" || c.TokenARN != ""
	switch {
	case c.Token != "" && c.TokenARN != "":
		return errors.New("set at most one of GITHUB_TOKEN_ARN and GITHUB_TOKEN (local stack)")
	case !app && !token:
		return errors.New("configure a GitHub App (GITHUB_APP_ID and its private key), a token (GITHUB_TOKEN_ARN), or both")
	case app && c.AppID == 0:
		return errors.New("GITHUB_APP_ID is required with GITHUB_APP_INSTALLATION_ID or a private key")
	case app && (c.PrivateKeyARN == "") == (c.PrivateKey == ""):
		return errors.New("set exactly one of GITHUB_APP_PRIVATE_KEY_ARN and GITHUB_APP_PRIVATE_KEY (local stack)")
	}
	return nil
}

// RunnerURL is where runners register for an API root: https://github.com for
// api.github.com, https://HOST for https://HOST/api/v3/.
func RunnerURL(api string) string {
	api = strings.TrimSuffix(api, "/")
	if api == "https://api.github.com" {
		return "https://github.com"
	}
	return strings.TrimSuffix(api, "/api/v3")
}
