package consent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/dbtest"
	"github.com/flowd/flowd/internal/pii"
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

	create := func(flowID string) string {
		var link string
		if err := database.WithTx(ctx, pool, func(tx pgx.Tx) (err error) {
			link, err = r.CreateTx(ctx, tx, "org-1", flowID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return link
	}
	flowA, flowB := uuid.NewString(), uuid.NewString()
	linkA, linkB := create(flowA), create(flowB)
	tokenA, ok := strings.CutPrefix(linkA, "https://flowd.example/consent/")
	if !ok || len(tokenA) != 43 || strings.ContainsAny(tokenA, "+/=") || linkA == linkB || strings.Contains(linkA, flowA) {
		t.Fatalf("links %q %q: want 32 random bytes, base64url, not the flow id", linkA, linkB)
	}
	if got, err := r.URL(ctx, flowA); err != nil || got != linkA {
		t.Fatalf("URL = %q, %v", got, err)
	}
	// queued reads the links of ids through QueueURL, in one round trip.
	queued := func(ids ...string) ([]string, []error) {
		b := batchRead{&pgx.Batch{}}
		reads := make([]func() (string, error), len(ids))
		for i, id := range ids {
			reads[i] = r.QueueURL(b, id)
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
	if _, err := r.QueueURL(batchRead{&pgx.Batch{}}, flowA)(); err == nil {
		t.Fatal("QueueURL of a read never sent answered without error")
	}
	if got, err := r.FlowIDForToken(ctx, tokenA); err != nil || got != flowA {
		t.Fatalf("FlowIDForToken = %q, %v", got, err)
	}
	var stored string
	if err := pool.QueryRow(ctx, `select string_agg(c::text, '') from consent_requests c`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored, tokenA) {
		t.Fatal("the link token is stored in clear")
	}
	for _, bad := range []string{"", "short", strings.Repeat("A", 43), tokenA[:42] + "x"} {
		if _, err := r.FlowIDForToken(ctx, bad); !errors.Is(err, consent.ErrUnknownLink) {
			t.Errorf("FlowIDForToken(%q) = %v", bad, err)
		}
	}
	if err := database.WithTx(ctx, pool, func(tx pgx.Tx) error { return r.DeleteTx(ctx, tx, flowA) }); err != nil {
		t.Fatal(err)
	}
	if _, err := r.URL(ctx, flowA); !errors.Is(err, consent.ErrUnknownLink) {
		t.Fatalf("URL after delete: %v", err)
	}
	if _, errs := queued(flowA); !errors.Is(errs[0], consent.ErrUnknownLink) {
		t.Fatalf("QueueURL after delete: %v", errs[0])
	}
	if _, err := r.FlowIDForToken(ctx, tokenA); !errors.Is(err, consent.ErrUnknownLink) {
		t.Fatalf("FlowIDForToken after delete: %v", err)
	}
	if _, err := r.URL(ctx, flowB); err != nil {
		t.Fatalf("the other request: %v", err)
	}
}
