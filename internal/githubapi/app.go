package githubapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"
)

// AppClient authenticates as the GitHub App itself (a JWT, not an installation
// token), for the App's webhook delivery log.
type AppClient struct{ gh *github.Client }

// NewApp returns a client for the App of cfg.Auth (app id and private key).
func NewApp(cfg Config) (*AppClient, error) {
	if cfg.Auth.AppID == 0 || len(cfg.Auth.PrivateKey) == 0 {
		return nil, errors.New("github app client: an app id and a private key are required")
	}
	base, tr := cfg.endpoint()
	atr, err := ghinstallation.NewAppsTransport(tr, cfg.Auth.AppID, cfg.Auth.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("github app key: %w", err)
	}
	atr.BaseURL = strings.TrimSuffix(base, "/")
	gh, err := github.NewClient(github.WithURLs(&base, &base), github.WithTransport(atr), github.WithDisableRateLimitCheck())
	if err != nil {
		return nil, fmt.Errorf("github app client: %w", err)
	}
	return &AppClient{gh: gh}, nil
}

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
		page, resp, err := a.gh.Apps.ListHookDeliveries(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing the App's webhook deliveries: %w", err)
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
	_, _, err := a.gh.Apps.RedeliverHookDelivery(ctx, id)
	var accepted *github.AcceptedError
	if err != nil && !errors.As(err, &accepted) {
		return fmt.Errorf("redelivering webhook delivery %d: %w", id, err)
	}
	return nil
}
