package admin

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/cmd/flowd/internal/wiring"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks"
)

// runRotateWebhookSecret handles "flowd orgs rotate-webhook-secret --org
// ORG_ID [--json]": it prints the new secret once; the previous one keeps
// signing for 24 hours so receivers can switch over.
func runRotateWebhookSecret(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("orgs rotate-webhook-secret", flag.ContinueOnError)
	org := fs.String("org", "", "organization id (required)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if strings.TrimSpace(*org) == "" {
		return command.Usagef("orgs rotate-webhook-secret: --org is required")
	}
	hooks, closePool, err := openWebhooks(ctx, sys)
	if err != nil {
		return err
	}
	defer closePool()
	s, err := hooks.RotateSecret(ctx, strings.TrimSpace(*org))
	if errors.Is(err, webhooks.ErrNotFound) {
		return fmt.Errorf("orgs rotate-webhook-secret: organization %q has no webhook secret (is the id right?)", *org)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(sys.Stdout).Encode(map[string]string{"webhookSecret": s.Value})
	}
	fmt.Fprintf(sys.Stdout, "New webhook secret of organization %s (shown once):\n  %s\nThe previous secret keeps signing beside it for 24 hours.\n", *org, s.Value)
	return nil
}

// runRotateWebhookKey handles "flowd orgs rotate-webhook-key --org ORG_ID
// [--json]": a new ed25519 key pair signs the v1a signatures; the previous
// one signs beside it for 24 hours, and both are published.
func runRotateWebhookKey(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("orgs rotate-webhook-key", flag.ContinueOnError)
	org := fs.String("org", "", "organization id (required)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	id := strings.TrimSpace(*org)
	if id == "" {
		return command.Usagef("orgs rotate-webhook-key: --org is required")
	}
	hooks, closePool, err := openWebhooks(ctx, sys)
	if err != nil {
		return err
	}
	defer closePool()
	// Every organization has a webhook secret from its creation: one
	// without is no organization, and gets no key pair.
	if _, err := hooks.CurrentSecret(ctx, id); errors.Is(err, webhooks.ErrNotFound) {
		return fmt.Errorf("orgs rotate-webhook-key: no organization %q (is the id right?)", id)
	} else if err != nil {
		return err
	}
	keys, err := hooks.RotateSigningKey(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		type key struct {
			KeyID     string `json:"kid"`
			Key       string `json:"key"`
			ExpiresAt any    `json:"expiresAt"`
		}
		out := struct {
			Keys []key `json:"keys"`
		}{}
		for _, k := range keys {
			var exp any
			if k.ExpiresAt != nil {
				exp = k.ExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")
			}
			out.Keys = append(out.Keys, key{KeyID: k.ID, Key: k.Key, ExpiresAt: exp})
		}
		return json.NewEncoder(sys.Stdout).Encode(out)
	}
	fmt.Fprintf(sys.Stdout, "New webhook signing key of organization %s: %s\n  %s\nThe previous key keeps signing beside it for 24 hours.\n",
		id, keys[0].ID, keys[0].Key)
	return nil
}

// openWebhooks builds the webhooks module for a command that changes an
// organization's signing secrets: FLOWD_KEY_ENCRYPTION_KEY seals them, so the
// secrets are needed. The caller closes the pool with closePool.
func openWebhooks(ctx context.Context, sys command.Env) (_ *webhooks.Module, closePool func(), _ error) {
	cfg, err := config.Load(sys.Getenv, config.Need{Database: true, Secrets: true})
	if err != nil {
		return nil, nil, err
	}
	pool, err := database.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return nil, nil, err
	}
	hooks, err := wiring.NewWebhooks(wiring.Env{Config: cfg, Pool: pool})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return hooks, pool.Close, nil
}
