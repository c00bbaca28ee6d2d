package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/dbtest"
)

// TestScanSummariesDecodesRawRowsAsScanDoes reads the same rows in binary,
// which scanSummaries decodes itself, and through the simple protocol, in
// text, which it hands to pgx's Scan, and wants the values inserted from
// both: a NULL, empty bytes, an instant before 2000, a flow number past 32 bits.
func TestScanSummariesDecodesRawRowsAsScanDoes(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		insert into flows (id, organization_id, flow_number, reference_id, reference_name, consent_status, sandbox, pii_key_id,
			national_id_sealed, national_id_hmac, last_name_sealed, redirect_url, process_instance_id, created_by, expires_at,
			created_at, updated_at)
		values
		('00000000-0000-7000-8000-000000000001', 'org-a', 1099511627776, 'REF-1', 'Lån <&>', 'Accepted', true, 'k1',
			'\x00ff10', '\x00', '\x00', 'https://x.example', gen_random_uuid(), 'test', now() + interval '1 day',
			'2026-11-22 10:11:12.345678+00', '2026-11-22 10:11:13+00'),
		('00000000-0000-7000-8000-000000000002', 'org-a', 2, 'REF-2', null, 'Unopened', false, 'k2',
			'\x', '\x00', '\x00', 'https://x.example', gen_random_uuid(), 'test', now() + interval '1 day',
			'1999-12-31 23:59:59.999999+00', '1999-12-31 23:59:59.999999+00')`); err != nil {
		t.Fatal(err)
	}
	sql := `select ` + summaryColumns + ` from flows where organization_id = $1 order by created_at desc`
	read := func(mode pgx.QueryExecMode, wantBinary bool) []FlowSummary {
		t.Helper()
		rows, err := pool.Query(ctx, sql, mode, "org-a")
		if err != nil {
			t.Fatal(err)
		}
		if got := binarySummaries(rows.FieldDescriptions()); got != wantBinary {
			t.Fatalf("%v: binary formats %v, want %v", mode, got, wantBinary)
		}
		out, err := scanSummaries(rows, "org-a", 10)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	decoded := read(pgx.QueryExecModeCacheStatement, true)
	scanned := read(pgx.QueryExecModeSimpleProtocol, false)

	want := []FlowSummary{{
		ID: "00000000-0000-7000-8000-000000000001", OrganizationID: "org-a", Number: 1 << 40,
		ReferenceID: "REF-1", ReferenceName: "Lån <&>", ConsentStatus: "Accepted", ProcessStatus: "active",
		Sandbox: true, PIIKeyID: "k1", NationalIDSealed: []byte{0x00, 0xff, 0x10},
		CreatedAt: time.Date(2026, 11, 22, 10, 11, 12, 345678000, time.UTC), UpdatedAt: time.Date(2026, 11, 22, 10, 11, 13, 0, time.UTC),
	}, {
		ID: "00000000-0000-7000-8000-000000000002", OrganizationID: "org-a", Number: 2,
		ReferenceID: "REF-2", ConsentStatus: "Unopened", ProcessStatus: "active", PIIKeyID: "k2", NationalIDSealed: []byte{},
		CreatedAt: time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC), UpdatedAt: time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC),
	}}
	for name, got := range map[string][]FlowSummary{"decoded": decoded, "scanned": scanned} {
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, want %d", name, len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if !g.CreatedAt.Equal(w.CreatedAt) || !g.UpdatedAt.Equal(w.UpdatedAt) {
				t.Errorf("%s row %d: instants %v, %v; want %v, %v", name, i, g.CreatedAt, g.UpdatedAt, w.CreatedAt, w.UpdatedAt)
			}
			g.CreatedAt, g.UpdatedAt, w.CreatedAt, w.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("%s row %d:\n got %+v\nwant %+v", name, i, g, w)
			}
		}
	}
	// The decoded instants are the very values pgx's binary Scan makes.
	var created time.Time
	if err := pool.QueryRow(ctx, `select created_at from flows where flow_number = 2`).Scan(&created); err != nil {
		t.Fatal(err)
	}
	if decoded[1].CreatedAt != created {
		t.Errorf("decoded instant %#v, pgx scans %#v", decoded[1].CreatedAt, created)
	}
}

func TestBinaryTimestamptzRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	for name, b := range map[string][]byte{
		"infinity":  {0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"-infinity": {0x80, 0, 0, 0, 0, 0, 0, 0},
		"short":     {0, 0, 0, 1},
	} {
		if got, err := binaryTimestamptz(b); err == nil {
			t.Errorf("%s: %v, want an error", name, got)
		}
	}
}
