package wiring

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

const (
	keyARN   = "arn:aws:secretsmanager:us-east-1:123456789012:secret:app-key"
	tokenARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:token"
	endpoint = "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com"
)

// appKey is a GitHub App private key (PEM), made once.
var appKey = sync.OnceValue(func() []byte {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
})

// clusterCA is a cluster's certificate authority as EKS reports it (base64 PEM), made once.
var clusterCA = sync.OnceValue(func() string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
})

// secretStore is a Secrets Manager holding values by ARN; it records what was read.
type secretStore struct {
	values map[string]string
	err    error
	read   []string
}

func (s *secretStore) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	s.read = append(s.read, aws.ToString(in.SecretId))
	if s.err != nil {
		return nil, s.err
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(s.values[aws.ToString(in.SecretId)])}, nil
}

// clusters is EKS with one cluster; it records the clusters described.
type clusters struct {
	name, endpoint, ca string
	err                error
	described          []string
}

func (c *clusters) DescribeCluster(_ context.Context, in *eks.DescribeClusterInput, _ ...func(*eks.Options)) (*eks.DescribeClusterOutput, error) {
	c.described = append(c.described, aws.ToString(in.Name))
	if c.err != nil {
		return nil, c.err
	}
	if aws.ToString(in.Name) != c.name {
		return nil, errors.New("ResourceNotFoundException: no such cluster")
	}
	return &eks.DescribeClusterOutput{Cluster: &ekstypes.Cluster{Endpoint: aws.String(c.endpoint),
		CertificateAuthority: &ekstypes.Certificate{Data: aws.String(c.ca)}}}, nil
}

// idleDB is a DynamoDB that is never called while the sweeper is built.
type idleDB struct{ DynamoDB }

// fakes are one test's clients, and the configurations Connect was called with.
type fakes struct {
	secrets   *secretStore
	eks       *clusters
	connected []sweeper.Config
}

func newFakes() *fakes {
	return &fakes{
		secrets: &secretStore{values: map[string]string{keyARN: string(appKey()), tokenARN: "ghp_token\n"}},
		eks:     &clusters{name: "runners", endpoint: endpoint, ca: clusterCA()},
	}
}

func (f *fakes) clients() Clients {
	return Clients{Secrets: f.secrets, EKS: f.eks, STS: sts.New(sts.Options{Region: "us-east-1"}), DynamoDB: idleDB{}}
}

func (f *fakes) connect(_ context.Context, cfg sweeper.Config) (Clients, error) {
	f.connected = append(f.connected, cfg)
	return f.clients(), nil
}

// environ is the deployed function's environment (template.yaml) with the local
// stack's pools file: an App whose key, and a token, are in Secrets Manager, and
// an EKS cluster found by its name.
func environ() map[string]string {
	return map[string]string{"TABLE_NAME": "runnerscaler-table", "POOLS_CONFIG": "../../../local/pools.yaml",
		"EKS_CLUSTER_NAME": "runners", "GITHUB_APP_ID": "7", "GITHUB_APP_PRIVATE_KEY_ARN": keyARN, "GITHUB_TOKEN_ARN": tokenARN}
}

func build(t *testing.T, vars map[string]string, f *fakes) (*sweeper.Sweeper, error) {
	t.Helper()
	return FromEnv(t.Context(), Env{Getenv: func(k string) string { return vars[k] }, Connect: f.connect,
		Clock: clocktesting.NewFakeClock(time.Now())})
}

// TestFromEnvBuildsTheDeployedSweeper: with the deployed environment the
// sweeper is built after one Connect with the configuration, reading the App's
// key and the token from Secrets Manager and the cluster from EKS by its name.
func TestFromEnvBuildsTheDeployedSweeper(t *testing.T) {
	t.Parallel()
	f := newFakes()
	vars := environ()
	vars["DYNAMODB_ENDPOINT"] = "http://127.0.0.1:8000"
	s, err := build(t, vars, f)
	if err != nil || s == nil {
		t.Fatalf("FromEnv: %v, %v; want a sweeper", s, err)
	}
	if len(f.connected) != 1 || f.connected[0].DynamoDBEndpoint != "http://127.0.0.1:8000" || f.connected[0].TableName != "runnerscaler-table" {
		t.Fatalf("connected with %+v, want once with the table and DynamoDB endpoint", f.connected)
	}
	if got := strings.Join(f.secrets.read, " "); got != keyARN+" "+tokenARN {
		t.Fatalf("secrets read %v, want the App key's and the token's, once each", f.secrets.read)
	}
	if got := strings.Join(f.eks.described, " "); got != "runners" {
		t.Fatalf("clusters described %v, want runners once", f.eks.described)
	}
}

// TestRestConfigFindsTheCluster: EKS_CLUSTER_NAME alone asks EKS for the
// cluster's endpoint and CA; with EKS_ENDPOINT and EKS_CA, EKS is not asked;
// KUBECONFIG (the local stack) is read instead of either.
func TestRestConfigFindsTheCluster(t *testing.T) {
	t.Parallel()
	ca, err := base64.StdEncoding.DecodeString(clusterCA())
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: local, user: {token: t}}]
contexts: [{name: local, context: {cluster: local, user: local}}]
current-context: local
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		cfg       sweeper.Config
		host      string
		described int
	}{
		{"by name", sweeper.Config{EKSCluster: "runners"}, endpoint, 1},
		{"given", sweeper.Config{EKSCluster: "runners", EKSEndpoint: "https://given.example", EKSCA: clusterCA()}, "https://given.example", 0},
		{"kubeconfig", sweeper.Config{Kubeconfig: kubeconfig}, "https://127.0.0.1:6443", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakes()
			rc, err := restConfig(t.Context(), tc.cfg, f.clients(), clocktesting.NewFakeClock(time.Now()))
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != tc.host || len(f.eks.described) != tc.described {
				t.Fatalf("host %q after %d descriptions, want %q after %d", rc.Host, len(f.eks.described), tc.host, tc.described)
			}
			if tc.cfg.Kubeconfig == "" && string(rc.CAData) != string(ca) {
				t.Fatalf("CA %q, want the cluster's", rc.CAData)
			}
		})
	}
}

// TestSecrets: the App's key as stored, the token without the newline a file
// upload leaves; on the local stack, plain-text values without Secrets Manager.
func TestSecrets(t *testing.T) {
	t.Parallel()
	f := newFakes()
	key, token, err := secrets(t.Context(), sweeper.Config{PrivateKeyARN: keyARN, TokenARN: tokenARN}, f.secrets)
	if err != nil || string(key) != string(appKey()) || token != "ghp_token" {
		t.Fatalf("secrets: key %d bytes, token %q, %v; want the stored key and ghp_token", len(key), token, err)
	}
	f = newFakes()
	key, token, err = secrets(t.Context(), sweeper.Config{PrivateKey: "PEM", Token: "plain"}, f.secrets)
	if err != nil || string(key) != "PEM" || token != "plain" || len(f.secrets.read) != 0 {
		t.Fatalf("local secrets: %q, %q, %v after %d reads; want the plain values and no read", key, token, err, len(f.secrets.read))
	}
}

// TestFromEnvFailures: a missing or invalid setting fails before any client is
// built, naming the variable; a pools file that does not load names the file;
// a secret that cannot be read, or is empty, names its ARN; a cluster EKS does
// not describe names the cluster; an enterprise pool without a token names the
// pool.
func TestFromEnvFailures(t *testing.T) {
	t.Parallel()
	enterprise := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(enterprise, []byte("pools:\n  - {name: ent, enterprise: acme, maxReplicas: 1, kubernetes: {namespace: n, image: i}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		edit    func(vars map[string]string, f *fakes)
		want    string
		connect bool // Connect was called
	}{
		{"no table", func(v map[string]string, _ *fakes) { delete(v, "TABLE_NAME") }, "TABLE_NAME", false},
		{"no pools file", func(v map[string]string, _ *fakes) { delete(v, "POOLS_CONFIG") }, "POOLS_CONFIG", false},
		{"no cluster", func(v map[string]string, _ *fakes) { delete(v, "EKS_CLUSTER_NAME") }, "EKS_CLUSTER_NAME", false},
		{"no App id", func(v map[string]string, _ *fakes) { delete(v, "GITHUB_APP_ID") }, "GITHUB_APP_ID", false},
		{"bad log level", func(v map[string]string, _ *fakes) { v["AWS_LAMBDA_LOG_LEVEL"] = "LOUD" }, `"LOUD"`, false},
		{"pools file missing", func(v map[string]string, _ *fakes) { v["POOLS_CONFIG"] = "missing.yaml" }, "missing.yaml", false},
		{"key unreadable", func(_ map[string]string, f *fakes) { f.secrets.err = errors.New("AccessDenied") }, keyARN, true},
		{"token empty", func(_ map[string]string, f *fakes) { f.secrets.values[tokenARN] = "" }, tokenARN, true},
		{"cluster unknown", func(_ map[string]string, f *fakes) { f.eks.name = "other" }, "EKS cluster runners", true},
		{"enterprise pool without token", func(v map[string]string, _ *fakes) {
			v["POOLS_CONFIG"] = enterprise
			delete(v, "GITHUB_TOKEN_ARN")
		}, "pool ent", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, vars := newFakes(), environ()
			tc.edit(vars, f)
			s, err := build(t, vars, f)
			if err == nil || s != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("FromEnv: %v, %v; want an error naming %s", s, err, tc.want)
			}
			if called := len(f.connected) > 0; called != tc.connect {
				t.Fatalf("Connect called: %v, want %v", called, tc.connect)
			}
		})
	}
}

// TestAWSRetriesTheStartLonger: the clients the start depends on (Secrets
// Manager, EKS) retry 8 times in adaptive mode; DynamoDB goes to the
// configured endpoint.
func TestAWSRetriesTheStartLonger(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	c, err := AWS(t.Context(), sweeper.Config{DynamoDBEndpoint: "http://127.0.0.1:8000"})
	if err != nil {
		t.Fatal(err)
	}
	sm, ok := c.Secrets.(*secretsmanager.Client)
	if !ok {
		t.Fatalf("Secrets is a %T", c.Secrets)
	}
	ek, ok := c.EKS.(*eks.Client)
	if !ok {
		t.Fatalf("EKS is a %T", c.EKS)
	}
	db, ok := c.DynamoDB.(*dynamodb.Client)
	if !ok {
		t.Fatalf("DynamoDB is a %T", c.DynamoDB)
	}
	if o := sm.Options(); o.RetryMaxAttempts != 8 || o.RetryMode != aws.RetryModeAdaptive {
		t.Errorf("Secrets Manager: %d attempts, mode %q; want 8, adaptive", o.RetryMaxAttempts, o.RetryMode)
	}
	if o := ek.Options(); o.RetryMaxAttempts != 8 || o.RetryMode != aws.RetryModeAdaptive {
		t.Errorf("EKS: %d attempts, mode %q; want 8, adaptive", o.RetryMaxAttempts, o.RetryMode)
	}
	if got := aws.ToString(db.Options().BaseEndpoint); got != "http://127.0.0.1:8000" {
		t.Errorf("DynamoDB endpoint %q, want the configured one", got)
	}
}
