package githubapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// AppClient authenticates as the GitHub App itself (a JWT, not an installation
// token), for the App's webhook delivery log and its installations. Its calls
// pass its own rate-limit gate and call counter. It is safe for concurrent use.
type AppClient struct {
	gh    *github.Client
	meter *meter
}

// NewApp returns a client for the App of cfg.Auth (app id and private key). It
// does not call GitHub.
func NewApp(cfg Config) (*AppClient, error) {
	if cfg.Auth.AppID == 0 || len(cfg.Auth.PrivateKey) == 0 {
		return nil, errors.New("github app client: an app id and a private key are required")
	}
	base, tr := cfg.endpoint()
	m := newMeter(cfg.Clock)
	atr, err := ghinstallation.NewAppsTransport(m.transport(tr), cfg.Auth.AppID, cfg.Auth.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("github app key: %w", err)
	}
	atr.BaseURL = strings.TrimSuffix(base, "/")
	gh, err := github.NewClient(github.WithURLs(&base, &base), github.WithTransport(atr), github.WithDisableRateLimitCheck())
	if err != nil {
		return nil, fmt.Errorf("github app client: %w", err)
	}
	return &AppClient{gh: gh, meter: m}, nil
}

// Stats returns the counts since the client was made.
func (a *AppClient) Stats() Stats { return a.meter.snapshot() }

// HookDelivery is one attempt in the App's webhook delivery log.
type HookDelivery struct {
	ID          int64
	GUID        string
	Event       string
	Action      string
	StatusCode  int
	DeliveredAt time.Time
	Redelivery  bool
}

// OK reports whether the webhook accepted the attempt (2xx).
func (d HookDelivery) OK() bool { return d.StatusCode >= 200 && d.StatusCode <= 299 }

// Deliveries lists the delivery attempts made at or after since, newest first.
//
// GET /app/hook/deliveries (per_page=100, cursor pagination).
func (a *AppClient) Deliveries(ctx context.Context, since time.Time) ([]HookDelivery, error) {
	opts := &github.ListCursorOptions{PerPage: 100}
	var out []HookDelivery
	for {
		var page []*github.HookDelivery
		var resp *github.Response
		err := a.meter.call(ctx, OpListHookDeliveries, "listing the App's webhook deliveries", func(ctx context.Context) (*github.Response, error) {
			var err error
			page, resp, err = a.gh.Apps.ListHookDeliveries(ctx, opts)
			return resp, err
		})
		if err != nil {
			return nil, err
		}
		for _, d := range page {
			if d.GetDeliveredAt().Before(since) {
				return out, nil
			}
			out = append(out, HookDelivery{ID: d.GetID(), GUID: d.GetGUID(), Event: d.GetEvent(), Action: d.GetAction(),
				StatusCode: d.GetStatusCode(), DeliveredAt: d.GetDeliveredAt().Time, Redelivery: d.GetRedelivery()})
		}
		if resp.Cursor == "" {
			return out, nil
		}
		opts.Cursor = resp.Cursor
	}
}

// Redeliver asks GitHub to send a delivery again (it answers 202).
//
// POST /app/hook/deliveries/{delivery_id}/attempts.
func (a *AppClient) Redeliver(ctx context.Context, id int64) error {
	return a.meter.call(ctx, OpRedeliver, fmt.Sprintf("redelivering webhook delivery %d", id), func(ctx context.Context) (*github.Response, error) {
		_, resp, err := a.gh.Apps.RedeliverHookDelivery(ctx, id)
		var accepted *github.AcceptedError
		if errors.As(err, &accepted) {
			return resp, nil
		}
		return resp, err
	})
}

// installationID returns the id of the App's installation serving scope s (an
// organization or repository scope); ErrNotFound: the App is not installed there.
//
// GET /orgs/{org}/installation or GET /repos/{owner}/{repo}/installation.
func (a *AppClient) installationID(ctx context.Context, s scope.Scope) (int64, error) {
	es, err := escaped(s)
	if err != nil {
		return 0, fmt.Errorf("finding the GitHub App's installation: %w", err)
	}
	var inst *github.Installation
	err = a.meter.call(ctx, OpFindInstallation, "finding the GitHub App's installation on "+s.String(), func(ctx context.Context) (resp *github.Response, err error) {
		if es.Kind() == scope.Organization {
			inst, resp, err = a.gh.Apps.GetOrganizationInstallation(ctx, es.Organization)
		} else {
			inst, resp, err = a.gh.Apps.GetRepositoryInstallation(ctx, es.Owner(), es.Repo())
		}
		return resp, err
	})
	if errors.Is(err, ErrNotFound) {
		return 0, fmt.Errorf("%w (is the App installed there?)", err)
	}
	if err != nil {
		return 0, err
	}
	return inst.GetID(), nil
}
