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
	// AppID and InstallationID identify the GitHub App installation
	// (GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID).
	AppID, InstallationID int64
	// PrivateKeyARN names the Secrets Manager secret with the App's private key
	// (GITHUB_APP_PRIVATE_KEY_ARN); PrivateKey is the PEM itself, for the local stack
	// only (GITHUB_APP_PRIVATE_KEY).
	PrivateKeyARN, PrivateKey string
	// Token is a personal access token instead of an App (GITHUB_TOKEN).
	Token string
}

// ConfigFromEnv reads the configuration through getenv and validates it.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		TableName: getenv("TABLE_NAME"), PoolsConfig: getenv("POOLS_CONFIG"), DynamoDBEndpoint: getenv("DYNAMODB_ENDPOINT"),
		Lease: 30 * time.Second, Parallelism: 4, Kubeconfig: getenv("KUBECONFIG"),
		EKSCluster: getenv("EKS_CLUSTER_NAME"), EKSEndpoint: getenv("EKS_ENDPOINT"), EKSCA: getenv("EKS_CA"),
		GitHubURL: getenv("GITHUB_URL"), RunnerGitHubURL: getenv("RUNNER_GITHUB_URL"),
		PrivateKeyARN: getenv("GITHUB_APP_PRIVATE_KEY_ARN"), PrivateKey: getenv("GITHUB_APP_PRIVATE_KEY"), Token: getenv("GITHUB_TOKEN"),
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
	if c.GitHubURL == "" {
		c.GitHubURL = "https://api.github.com/"
	}
	if c.RunnerGitHubURL == "" {
		c.RunnerGitHubURL = RunnerURL(c.GitHubURL)
	}
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
	if (c.Kubeconfig == "") == (c.EKSCluster == "") {
		errs = append(errs, errors.New("set exactly one of EKS_CLUSTER_NAME and KUBECONFIG (local stack): the cluster the runners live in"))
	}
	if (c.EKSEndpoint == "") != (c.EKSCA == "") {
		errs = append(errs, errors.New("set both EKS_ENDPOINT and EKS_CA, or neither (then eks:DescribeCluster finds them)"))
	}
	app := c.AppID != 0 || c.InstallationID != 0 || c.PrivateKeyARN != "" || c.PrivateKey != ""
	switch {
	case app && c.Token != "":
		errs = append(errs, errors.New("set either GITHUB_APP_* or GITHUB_TOKEN, not both"))
	case c.Token == "" && (c.AppID == 0 || c.InstallationID == 0):
		errs = append(errs, errors.New("GITHUB_APP_ID and GITHUB_APP_INSTALLATION_ID are required (or GITHUB_TOKEN)"))
	case c.Token == "" && (c.PrivateKeyARN == "") == (c.PrivateKey == ""):
		errs = append(errs, errors.New("set exactly one of GITHUB_APP_PRIVATE_KEY_ARN and GITHUB_APP_PRIVATE_KEY (local stack)"))
	}
	return errors.Join(errs...)
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
