package kube

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/aws-iam-authenticator/pkg/token"
)

// ClusterAPI is the part of the EKS client used to find a cluster.
type ClusterAPI interface {
	DescribeCluster(ctx context.Context, in *eks.DescribeClusterInput, opts ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

// Cluster is where an EKS cluster's API server is and how to trust it.
type Cluster struct {
	Name     string
	Endpoint string
	// CA is the cluster's certificate authority, base64 PEM as EKS reports it.
	CA string
}

// Describe fills the endpoint and CA of a cluster from eks:DescribeCluster.
func Describe(ctx context.Context, api ClusterAPI, name string) (Cluster, error) {
	out, err := api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		return Cluster{}, fmt.Errorf("describing EKS cluster %s: %w", name, err)
	}
	c := out.Cluster
	if c == nil || c.Endpoint == nil || c.CertificateAuthority == nil || c.CertificateAuthority.Data == nil {
		return Cluster{}, fmt.Errorf("EKS cluster %s has no endpoint or CA yet (status %v)", name, c)
	}
	return Cluster{Name: name, Endpoint: *c.Endpoint, CA: *c.CertificateAuthority.Data}, nil
}

// ForEKS returns a rest.Config for the cluster that authenticates every request
// with a bearer token from aws-iam-authenticator, signed with the credentials of
// stsClient (the Lambda's role). One STS client is shared, and the token is
// reused across warm invocations until a minute before it expires.
func ForEKS(c Cluster, stsClient *sts.Client, clk clock.PassiveClock) (*rest.Config, error) {
	ca, err := base64.StdEncoding.DecodeString(c.CA)
	if err != nil {
		return nil, fmt.Errorf("EKS cluster %s: CA is not base64: %w", c.Name, err)
	}
	src, err := NewTokenSource(c.Name, stsClient, clk)
	if err != nil {
		return nil, err
	}
	cfg := &rest.Config{Host: c.Endpoint, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &bearer{rt: rt, src: src} })
	return cfg, nil
}

// TokenSource hands out EKS bearer tokens, generating a new one a minute before
// the current one expires.
type TokenSource struct {
	gen     token.Generator
	sts     *sts.Client
	cluster string
	clock   clock.PassiveClock

	mu  sync.Mutex
	tok token.Token
}

// NewTokenSource returns a token source for cluster.
func NewTokenSource(cluster string, stsClient *sts.Client, clk clock.PassiveClock) (*TokenSource, error) {
	gen, err := token.NewGenerator(false, false)
	if err != nil {
		return nil, fmt.Errorf("EKS token generator: %w", err)
	}
	return &TokenSource{gen: gen, sts: stsClient, cluster: cluster, clock: clk}, nil
}

// Token returns a valid token: `k8s-aws-v1.` + a base64url presigned STS
// GetCallerIdentity URL carrying the x-k8s-aws-id header (the cluster name).
func (s *TokenSource) Token() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok.Token != "" && s.clock.Now().Add(time.Minute).Before(s.tok.Expiration) {
		return s.tok.Token, nil
	}
	tok, err := s.gen.GetWithSTS(s.cluster, s.sts)
	if err != nil {
		return "", fmt.Errorf("generating EKS token for cluster %s: %w", s.cluster, err)
	}
	s.tok = tok
	return tok.Token, nil
}

type bearer struct {
	rt  http.RoundTripper
	src *TokenSource
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := b.src.Token()
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	return b.rt.RoundTrip(req)
}
