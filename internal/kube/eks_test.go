package kube_test

import (
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/kube"
)

func stsClient() *sts.Client {
	return sts.New(sts.Options{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")})
}

// TestTokenFormat: k8s-aws-v1. + base64url of a presigned STS GetCallerIdentity
// URL that signs the x-k8s-aws-id header.
func TestTokenFormat(t *testing.T) {
	t.Parallel()
	src, err := kube.NewTokenSource("my-cluster", stsClient(), clocktesting.NewFakePassiveClock(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := src.Token()
	if err != nil {
		t.Fatal(err)
	}
	enc, ok := strings.CutPrefix(tok, "k8s-aws-v1.")
	if !ok {
		t.Fatalf("token %q lacks the k8s-aws-v1. prefix", tok)
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatalf("token is not base64url: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Host != "sts.eu-west-1.amazonaws.com" || q.Get("Action") != "GetCallerIdentity" ||
		!strings.Contains(q.Get("X-Amz-SignedHeaders"), "x-k8s-aws-id") || !strings.HasPrefix(q.Get("X-Amz-Credential"), "AKIDEXAMPLE/") {
		t.Fatalf("presigned URL %s is not an STS GetCallerIdentity signed for x-k8s-aws-id", u)
	}
	again, _ := src.Token()
	if again != tok {
		t.Fatal("a fresh token must be reused")
	}
}

// TestForEKSSendsTheToken: a client built from ForEKS trusts the cluster's CA and
// authenticates with the token.
func TestForEKSSendsTheToken(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var auth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","items":[]}`))
	}))
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg, err := kube.ForEKS(kube.Cluster{Name: "c", Endpoint: srv.URL, CA: base64.StdEncoding.EncodeToString(caPEM)}, stsClient(), clocktesting.NewFakePassiveClock(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kube.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatalf("request through the EKS config: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.HasPrefix(auth, "Bearer k8s-aws-v1.") {
		t.Fatalf("Authorization %q, want an EKS bearer token", auth)
	}
}
