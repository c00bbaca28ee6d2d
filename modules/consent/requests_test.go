package consent_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/consent"
)

// batchRead is the database.SharedRead of a pgx batch, as the flows module
// sends it.
type batchRead struct{ *pgx.Batch }

func (r batchRead) QueueRow(sql string, args []any, scan func(database.Row) error) {
	r.Queue(sql, args...).QueryRow(func(row pgx.Row) error { return scan(row) })
}

func TestConsentRequestLinks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	sealer, err := pii.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	r := consent.NewRequests(pool, sealer, "https://flowd.example")

	create := func(org, flowID string) string {
		var link string
		if err := database.WithTx(ctx, pool, func(tx pgx.Tx) (err error) {
			link, err = r.CreateTx(ctx, tx, org, flowID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return link
	}
	flowA, flowB := uuid.NewString(), uuid.NewString()
	linkA, linkB := create("org-1", flowA), create("org-1", flowB)
	tokenA, ok := strings.CutPrefix(linkA, "https://flowd.example/consent/")
	route, secret, _ := strings.Cut(tokenA, ".")
	if !ok || route != "t"+base64.RawURLEncoding.EncodeToString([]byte("org-1")) || len(secret) != 43 ||
		strings.ContainsAny(tokenA, "+/=") || linkA == linkB || strings.Contains(linkA, flowA) {
		t.Fatalf("links %q %q: want the organization's route and 32 random bytes, base64url, not the flow id", linkA, linkB)
	}
	if got, err := r.URL(ctx, "org-1", flowA); err != nil || got != linkA {
		t.Fatalf("URL = %q, %v", got, err)
	}
	if _, err := r.URL(ctx, "org-2", flowA); !errors.Is(err, consent.ErrUnknownLink) {
		t.Fatalf("URL of another organization's flow: %v", err)
	}
	// queued reads the links of org-1's ids through QueueURL, in one round trip.
	queued := func(ids ...string) ([]string, []error) {
		b := batchRead{&pgx.Batch{}}
		reads := make([]func() (string, error), len(ids))
		for i, id := range ids {
			reads[i] = r.QueueURL(b, "org-1", id)
		}
		if b.Len() > 0 {
			if err := pool.SendBatch(ctx, b.Batch).Close(); err != nil {
				t.Fatal(err)
			}
		}
		links, errs := make([]string, len(ids)), make([]error, len(ids))
		for i, read := range reads {
			links[i], errs[i] = read()
		}
		return links, errs
	}
	if links, errs := queued(flowA, flowB); errs[0] != nil || errs[1] != nil || links[0] != linkA || links[1] != linkB {
		t.Fatalf("QueueURL = %q, %v; want %q, %q", links, errs, linkA, linkB)
	}
	if _, errs := queued(uuid.NewString(), "not-a-uuid"); !errors.Is(errs[0], consent.ErrUnknownLink) || !errors.Is(errs[1], consent.ErrUnknownLink) {
		t.Fatalf("QueueURL of unknown flows: %v", errs)
	}
	if _, err := r.QueueURL(batchRead{&pgx.Batch{}}, "org-1", flowA)(); err == nil {
		t.Fatal("QueueURL of a read never sent answered without error")
	}
	if got, err := r.FlowForToken(ctx, tokenA); err != nil || got != (consent.FlowRef{OrganizationID: "org-1", FlowID: flowA}) {
		t.Fatalf("FlowForToken = %+v, %v", got, err)
	}
	var stored string
	if err := pool.QueryRow(ctx, `select string_agg(c::text, '') from consent_requests c`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored, secret) {
		t.Fatal("the link token is stored in clear")
	}
	otherRoute := "t" + base64.RawURLEncoding.EncodeToString([]byte("org-2"))
	for _, bad := range []string{"", "short", strings.Repeat("A", 43), tokenA[:len(tokenA)-1] + "x",
		otherRoute + "." + secret, // another organization's route
		secret,                    // the secret alone, as a link made before routes would be
		"x" + route[1:] + "." + secret, "t!." + secret, route + "." + secret[1:], strings.Repeat("t", 600) + "." + secret} {
		if _, err := r.FlowForToken(ctx, bad); !errors.Is(err, consent.ErrUnknownLink) {
			t.Errorf("FlowForToken(%q) = %v", bad, err)
		}
	}
	if err := database.WithTx(ctx, pool, func(tx pgx.Tx) error { return r.DeleteTx(ctx, tx, "org-1", flowA) }); err != nil {
		t.Fatal(err)
	}
	if _, err := r.URL(ctx, "org-1", flowA); !errors.Is(err, consent.ErrUnknownLink) {
		t.Fatalf("URL after delete: %v", err)
	}
	if _, errs := queued(flowA); !errors.Is(errs[0], consent.ErrUnknownLink) {
		t.Fatalf("QueueURL after delete: %v", errs[0])
	}
	if _, err := r.FlowForToken(ctx, tokenA); !errors.Is(err, consent.ErrUnknownLink) {
		t.Fatalf("FlowForToken after delete: %v", err)
	}
	if _, err := r.URL(ctx, "org-1", flowB); err != nil {
		t.Fatalf("the other request: %v", err)
	}
}

// TestConsentLinksRouteByTheirOrganization: an organization's UUID makes a
// short route, and a link made before routes (its secret alone) still
// finds its request.
func TestConsentLinksRouteByTheirOrganization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	sealer, err := pii.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	r := consent.NewRequests(pool, sealer, "https://flowd.example")
	org, flowID := uuid.New(), uuid.NewString()
	var link string
	if err := database.WithTx(ctx, pool, func(tx pgx.Tx) (err error) {
		link, err = r.CreateTx(ctx, tx, org.String(), flowID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	token := strings.TrimPrefix(link, "https://flowd.example/consent/")
	if want := "u" + base64.RawURLEncoding.EncodeToString(org[:]) + "."; !strings.HasPrefix(token, want) || len(token) != len(want)+43 {
		t.Fatalf("token %q: want %q and 43 characters", token, want)
	}
	if got, err := r.FlowForToken(ctx, token); err != nil || got != (consent.FlowRef{OrganizationID: org.String(), FlowID: flowID}) {
		t.Fatalf("FlowForToken = %+v, %v", got, err)
	}

	// A link of before routes, stored as CreateTx stored it then.
	legacy, legacyFlow := base64.RawURLEncoding.EncodeToString(make([]byte, 32)), uuid.NewString()
	hash := sha256.Sum256([]byte(legacy))
	if _, err := pool.Exec(ctx, `insert into consent_requests (flow_id, organization_id, token_hash, pii_key_id, token_sealed)
		values ($1, 'org-old', $2, $3, $4)`, legacyFlow, hash[:], sealer.KeyID(),
		sealer.Seal(legacy, "consent:"+legacyFlow+":token")); err != nil {
		t.Fatal(err)
	}
	if got, err := r.FlowForToken(ctx, legacy); err != nil || got != (consent.FlowRef{OrganizationID: "org-old", FlowID: legacyFlow}) {
		t.Fatalf("FlowForToken of a link made before routes = %+v, %v", got, err)
	}
	if got, err := r.URL(ctx, "org-old", legacyFlow); err != nil || got != "https://flowd.example/consent/"+legacy {
		t.Fatalf("URL of a link made before routes = %q, %v", got, err)
	}
}
