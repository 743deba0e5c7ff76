package stack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// pki is the stack's certificate authority and the files the control plane reads.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// newPKI creates (or loads, when the files exist) the CA, the API server's serving
// certificate, the client certificates of the admin, of the API server towards
// kubelets, of the scheduler and of the node, the kubelet's serving certificate,
// and the service-account key pair in dir. Files that exist are kept.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating pki dir: %w", err)
	}
	p := &pki{dir: dir}
	if err := p.loadOrCreateCA(); err != nil {
		return nil, err
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	certs := []struct {
		name  string
		issue func(name string) error
	}{
		{"apiserver", func(name string) error {
			return p.issue(name, &x509.Certificate{
				Subject:     pkix.Name{CommonName: "kube-apiserver"},
				DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
				IPAddresses: loopback,
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
		}},
		{"admin", func(name string) error { return p.IssueClient(name, "admin", []string{"system:masters"}) }},
		// The kubelet lets any client with a certificate of this CA in (AlwaysAllow).
		{"apiserver-kubelet-client", func(name string) error {
			return p.IssueClient(name, "kube-apiserver-kubelet-client", []string{"system:masters"})
		}},
		// RBAC's bootstrap policy binds system:kube-scheduler to what the scheduler needs.
		{"scheduler", func(name string) error { return p.IssueClient(name, "system:kube-scheduler", nil) }},
		// The Node authorizer and NodeRestriction know a kubelet by this name and group.
		{"node", func(name string) error {
			return p.IssueClient(name, "system:node:"+NodeName, []string{"system:nodes"})
		}},
		{"kubelet-serving", func(name string) error {
			return p.issue(name, &x509.Certificate{
				Subject:     pkix.Name{CommonName: NodeName},
				DNSNames:    []string{NodeName},
				IPAddresses: loopback,
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
		}},
	}
	for _, c := range certs {
		if _, err := os.Stat(p.path(c.name + ".key")); err == nil {
			continue
		}
		if err := c.issue(c.name); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(p.path("sa.key")); err == nil {
		return p, nil
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encoding service-account public key: %w", err)
	}
	if err := writePEM(p.path("sa.pub"), "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	return p, writeKey(p.path("sa.key"), saKey)
}

func (p *pki) loadOrCreateCA() error {
	if raw, err := os.ReadFile(p.path("ca.crt")); err == nil {
		return p.loadCA(raw)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "runnerscaler-local-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("signing CA certificate: %w", err)
	}
	if err := writePEM(p.path("ca.crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	if err := writeKey(p.path("ca.key"), key); err != nil {
		return err
	}
	p.caKey = key
	p.caCert, err = x509.ParseCertificate(der)
	return err
}

func (p *pki) loadCA(certPEM []byte) error {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return fmt.Errorf("reading %s: no PEM block", p.path("ca.crt"))
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("parsing CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(p.path("ca.key"))
	if err != nil {
		return fmt.Errorf("reading CA key: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return fmt.Errorf("reading %s: no PEM block", p.path("ca.key"))
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return fmt.Errorf("parsing CA key: %w", err)
	}
	p.caCert, p.caKey = cert, key
	return nil
}

// IssueClient writes <name>.crt/<name>.key: a client certificate for user in groups,
// which the API server authenticates (RBAC then decides what it may do).
func (p *pki) IssueClient(name, user string, groups []string) error {
	return p.issue(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (p *pki) issue(name string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating %s key: %w", name, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return fmt.Errorf("serial for %s: %w", name, err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().AddDate(5, 0, 0)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("signing %s certificate: %w", name, err)
	}
	if err := writePEM(p.path(name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(p.path(name+".key"), key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, kind string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// UserKubeconfig writes a kubeconfig for user in groups next to the stack's admin
// kubeconfig (same server and CA, a client certificate signed by the stack's CA)
// and returns its path: what a test needs to act as an RBAC subject.
func UserKubeconfig(adminKubeconfig, user string, groups []string) (string, error) {
	dir := filepath.Dir(adminKubeconfig)
	p, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return "", err
	}
	name := "user-" + user
	if err := p.IssueClient(name, user, groups); err != nil {
		return "", err
	}
	admin, err := clientcmd.LoadFromFile(adminKubeconfig)
	if err != nil {
		return "", fmt.Errorf("reading admin kubeconfig: %w", err)
	}
	path := filepath.Join(dir, name+".kubeconfig")
	return path, writeKubeconfig(path, admin.Clusters["local"].Server, p, name)
}
