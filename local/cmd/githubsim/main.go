// Command githubsim runs the GitHub simulator (package githubsim) as a process, for
// the local stack. It accepts JWTs of one GitHub App, whose private key it reads
// from -app-key (creating it, PEM, when the file does not exist), and the PATs of
// -pat; it prints its URL when it listens.
package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "githubsim:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	appID := flag.Int64("app-id", 1, "GitHub App id")
	installation := flag.Int64("installation", 1, "installation id of the App")
	keyFile := flag.String("app-key", ".stack/github-app.pem", "App private key (PEM); created if missing")
	pats := flag.String("pat", "", "comma-separated personal access tokens to accept")
	flag.Parse()

	key, err := loadOrCreateKey(*keyFile)
	if err != nil {
		return err
	}
	var tokens []string
	if *pats != "" {
		tokens = strings.Split(*pats, ",")
	}
	sim := githubsim.New(githubsim.Options{AppID: *appID, AppKey: &key.PublicKey, Installations: []int64{*installation}, PATs: tokens})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Printf("http://%s/\n", ln.Addr())
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 5 * time.Second}
	return srv.Serve(ln)
}

func loadOrCreateKey(path string) (*rsa.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		out := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
		return key, os.WriteFile(path, out, 0o600)
	}
	if err != nil {
		return nil, fmt.Errorf("reading App key: %w", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM block", path)
	}
	return x509.ParsePKCS1PrivateKey(block.Bytes)
}
