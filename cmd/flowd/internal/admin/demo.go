package admin

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/cmd/flowd/internal/wiring"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/staff"
)

// demoState is what `flowd demo` remembers between runs.
type demoState struct {
	OrganizationID string `json:"organizationId"`
	ClientID       string `json:"clientId"`
	ClientSecret   string `json:"clientSecret"`
	StaffUsername  string `json:"staffUsername"`
	StaffPassword  string `json:"staffPassword"`
}

// runDemo handles "flowd demo --state FILE": make run calls it before serve.
// The first time (or after the database was reset) it creates the "Demo
// Bank" organization and an API client and saves their ids and the secret in
// FILE (mode 0600), saying on stderr what it creates as it goes; every time it
// prints them on stdout with a ready-to-paste curl line, and the
// organization's webhook signing secret.
func runDemo(ctx context.Context, args []string, sys command.Env) error {
	fset := flag.NewFlagSet("demo", flag.ContinueOnError)
	statePath := fset.String("state", "", "file that keeps the demo organization and client (required)")
	if err := command.ParseFlags(fset, args); err != nil {
		return err
	}
	if *statePath == "" {
		return command.Usagef("demo: --state is required")
	}
	env, err := openAdmin(ctx, sys, config.Need{Secrets: true})
	if err != nil {
		return err
	}
	defer env.pool.Close()
	id := env.Orgs

	var st demoState
	b, err := os.ReadFile(*statePath)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("demo: %s is not a demo state file: %w", *statePath, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("demo: %w", err)
	}

	seeded := false
	org, err := id.Organization(ctx, st.OrganizationID)
	if errors.Is(err, orgs.ErrOrganizationNotFound) {
		fmt.Fprintln(sys.Stderr, `demo: creating the organization "Demo Bank"`)
		org, _, err = env.createOrganization(ctx, orgs.NewOrganization{Name: "Demo Bank", OrganizationNumber: "000000000", ReferencePrefix: "DEMO"})
		st = demoState{OrganizationID: org.ID}
		seeded = true
	}
	if err != nil {
		return adminError(err)
	}
	client, err := id.Client(ctx, st.ClientID)
	if errors.Is(err, orgs.ErrClientNotFound) || (err == nil && (client.Revoked() || client.OrganizationID != org.ID)) || st.ClientSecret == "" {
		fmt.Fprintln(sys.Stderr, "demo: creating its API client")
		cc, err := id.CreateClient(ctx, orgs.NewClient{OrganizationID: org.ID, Name: "Demo client"})
		if err != nil {
			return adminError(err)
		}
		st.ClientID, st.ClientSecret = cc.ID, cc.Secret
		seeded = true
	} else if err != nil {
		return adminError(err)
	}
	accounts, err := staff.NewAccounts(env.pool, env.Orgs, staff.Config{PasswordParams: env.cfg.PasswordHash})
	if err != nil {
		return err
	}
	if seeded || st.StaffPassword == "" {
		// A fresh organization (or a state file without the admin) gets the
		// demo admin; an account left from an earlier database keeps its
		// name and gets the new password.
		st.StaffUsername, st.StaffPassword = "admin@demo.bank", randomPassword()
		fmt.Fprintf(sys.Stderr, "demo: creating its staff admin %s\n", st.StaffUsername)
		_, err := accounts.CreateStaff(ctx, staff.NewAccount{OrganizationID: org.ID, Username: st.StaffUsername,
			Name: "Demo Admin", Role: staff.RoleAdmin, Password: st.StaffPassword})
		if errors.Is(err, staff.ErrAccountExists) {
			_, err = accounts.ResetStaffPassword(ctx, st.StaffUsername, st.StaffPassword,
				env.staffAudited(identity.AuditStaffPasswordReset, staff.EndedByPasswordReset))
		}
		if err != nil {
			return adminError(err)
		}
		seeded = true
	}
	if seeded {
		if err := writeDemoState(*statePath, st); err != nil {
			return err
		}
	}

	// The organization's webhook signing secret, for a receiver of the
	// demo's flows to check their signatures (Standard Webhooks).
	hooks, err := wiring.NewWebhooks(wiring.Env{Config: env.cfg, Pool: env.pool})
	if err != nil {
		return err
	}
	secret, err := hooks.CurrentSecret(ctx, org.ID)
	if err != nil {
		return err
	}

	tokenURL := env.cfg.URL("/oauth/token")
	verb := "Demo"
	if seeded {
		verb = "Created the demo"
	}
	fmt.Fprintf(sys.Stdout, "%s organization %q (id %s, reference prefix %s)\n", verb, org.Name, org.ID, org.ReferencePrefix)
	fmt.Fprintf(sys.Stdout, "  client_id      %s\n  client_secret  %s\n  token URL      %s\n", st.ClientID, st.ClientSecret, tokenURL)
	fmt.Fprintf(sys.Stdout, "Get a token:\n  curl -s -u '%s:%s' -d grant_type=client_credentials %s\n", st.ClientID, st.ClientSecret, tokenURL)
	fmt.Fprintf(sys.Stdout, "Webhooks: give a flow a webhookUrl; its events are signed with the organization's secret\n  webhook secret %s\n",
		secret.Value)
	fmt.Fprintf(sys.Stdout, "Console: %s (staff admin %s, password %s)\n", env.cfg.URL("/console"), st.StaffUsername, st.StaffPassword)
	fmt.Fprintf(sys.Stdout, "(kept in %s)\n", *statePath)
	return nil
}

// writeDemoState saves the state readable by its owner only, atomically.
func writeDemoState(path string, st demoState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".demo-*.json")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone after the rename; left only on failure
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("demo: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("demo: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

// randomPassword makes a demo password: 16 random bytes, base64url.
func randomPassword() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
