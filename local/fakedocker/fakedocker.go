package fakedocker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// Names the program answers to.
const (
	daemonName = "dockerd"
	cliName    = "docker"
)

// Version is what the stand-in reports as its docker version.
const Version = "27.0.0-standin"

// apiVersion is the docker API version the stand-in says it speaks (docker 27's).
const apiVersion = "1.47"

// listenAddress is where dockerd listens: docker:dind's TCP address with TLS
// off (DOCKER_TLS_CERTDIR empty), on every address of the pod (of the node,
// with hostNetwork, as the local stack's pods run).
const listenAddress = ":2375"

// defaultHost is the CLI's daemon when DOCKER_HOST is unset, as the real CLI's.
const defaultHost = "unix:///var/run/docker.sock"

// Env is what the program gets from its process: arguments (Args[0] is the name
// it was run as), environment and output.
type Env struct {
	Args   []string
	Getenv func(string) string
	Stdout io.Writer
	Stderr io.Writer
}

// Main runs the program as dockerd or docker, chosen by the base name of
// Args[0], and returns its exit code. dockerd serves until ctx is done (the
// command cancels it on SIGTERM or SIGINT).
func Main(ctx context.Context, env Env) int {
	if len(env.Args) == 0 {
		fmt.Fprintln(env.Stderr, "fakedocker: no arguments")
		return 2
	}
	switch name := filepath.Base(env.Args[0]); name {
	case daemonName:
		ln, err := net.Listen("tcp", listenAddress)
		if err != nil {
			fmt.Fprintf(env.Stderr, "dockerd (stand-in): %v\n", err)
			return 1
		}
		fmt.Fprintf(env.Stderr, "dockerd (stand-in for docker:27-dind) listening on %s; ignoring arguments %q\n", ln.Addr(), env.Args[1:])
		if err := Serve(ctx, ln); err != nil {
			fmt.Fprintf(env.Stderr, "dockerd (stand-in): %v\n", err)
			return 1
		}
		fmt.Fprintln(env.Stderr, "dockerd (stand-in): stopped at once, as a signal asked")
		return 0
	case cliName:
		return cli(ctx, env, env.Args[1:])
	default:
		fmt.Fprintf(env.Stderr, "fakedocker: run me as %s or %s (got %q)\n", daemonName, cliName, name)
		return 2
	}
}

// Serve answers the docker API on ln until ctx is done, then closes ln and
// every open connection at once (nil), without waiting for requests in flight.
func Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: http.HandlerFunc(answer), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		_ = srv.Close()
		<-done
		return nil
	case err := <-done:
		return err
	}
}

// versioned is the docker API's optional version prefix, e.g. /v1.47/info.
var versioned = regexp.MustCompile(`^/v[0-9]+\.[0-9]+/`)

// answer serves the few endpoints the CLI's info, version and ping use.
func answer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Api-Version", apiVersion)
	w.Header().Set("Ostype", "linux")
	path := versioned.ReplaceAllString(r.URL.Path, "/")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"message": r.Method + " " + path + ": the docker stand-in only answers ping, version and info"})
		return
	}
	switch path {
	case "/_ping":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "OK")
	case "/version":
		writeJSON(w, http.StatusOK, versionInfo{Version: Version, APIVersion: apiVersion, Os: "linux", Arch: runtime.GOARCH})
	case "/info":
		host, _ := os.Hostname()
		writeJSON(w, http.StatusOK, systemInfo{ID: "standin", Name: host, ServerVersion: Version,
			OperatingSystem: "runnerscaler local stand-in for docker:27-dind", OSType: "linux"})
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"message": path + ": the docker stand-in only answers ping, version and info"})
	}
}

// versionInfo and systemInfo are the fields of the docker API's /version and
// /info the stand-in fills, under the API's names.
type versionInfo struct {
	Version    string `json:"Version"`
	APIVersion string `json:"ApiVersion"`
	Os         string `json:"Os"`
	Arch       string `json:"Arch"`
}

type systemInfo struct {
	ID              string `json:"ID"`
	Name            string `json:"Name"`
	ServerVersion   string `json:"ServerVersion"`
	OperatingSystem string `json:"OperatingSystem"`
	OSType          string `json:"OSType"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// cli is `docker info`, `docker version` or `docker ping`.
func cli(ctx context.Context, env Env, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(env.Stderr, "docker (stand-in): usage: docker info | version | ping")
		return 2
	}
	host := env.Getenv("DOCKER_HOST")
	if host == "" {
		host = defaultHost
	}
	client, base, err := clientFor(host)
	if err != nil {
		fmt.Fprintf(env.Stderr, "docker (stand-in): DOCKER_HOST %q: %v\n", host, err)
		return 1
	}
	path := map[string]string{"info": "/info", "version": "/version", "ping": "/_ping"}[args[0]]
	if path == "" {
		fmt.Fprintf(env.Stderr, "docker (stand-in): %q: only info, version and ping are known\n", args[0])
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		fmt.Fprintf(env.Stderr, "docker (stand-in): %v\n", err)
		return 1
	}
	resp, err := client.Do(req)
	if err != nil {
		// The real CLI's words, which a job's log shows.
		fmt.Fprintf(env.Stderr, "Cannot connect to the Docker daemon at %s. Is the docker daemon running? (%v)\n", host, err)
		return 1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintf(env.Stderr, "docker (stand-in): %s%s: %s %v %s\n", host, path, resp.Status, err, strings.TrimSpace(string(body)))
		return 1
	}
	return show(env, args[0], body)
}

// show writes what the CLI prints for the command, from the daemon's answer.
func show(env Env, command string, body []byte) int {
	switch command {
	case "ping":
		fmt.Fprintln(env.Stdout, string(body))
	case "version":
		var v versionInfo
		if err := json.Unmarshal(body, &v); err != nil {
			fmt.Fprintf(env.Stderr, "docker (stand-in): reading /version: %v\n", err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "Server:\n Engine:\n  Version:          %s\n  API version:      %s\n  OS/Arch:          %s/%s\n", v.Version, v.APIVersion, v.Os, v.Arch)
	case "info":
		var i systemInfo
		if err := json.Unmarshal(body, &i); err != nil {
			fmt.Fprintf(env.Stderr, "docker (stand-in): reading /info: %v\n", err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "Server:\n Server Version: %s\n Operating System: %s\n OSType: %s\n ID: %s\n Name: %s\n",
			i.ServerVersion, i.OperatingSystem, i.OSType, i.ID, i.Name)
	}
	return 0
}

// clientFor is an HTTP client for DOCKER_HOST and the base URL of its requests.
func clientFor(host string) (*http.Client, string, error) {
	u, err := url.Parse(host)
	if err != nil {
		return nil, "", err
	}
	switch u.Scheme {
	case "tcp":
		if u.Host == "" {
			return nil, "", errors.New("no host:port")
		}
		return &http.Client{}, "http://" + u.Host, nil
	case "unix":
		dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", u.Path)
		}
		return &http.Client{Transport: &http.Transport{DialContext: dial}}, "http://docker", nil
	default:
		return nil, "", fmt.Errorf("scheme %q: the stand-in speaks tcp:// and unix://", u.Scheme)
	}
}
