package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/consent"
)

// seededID is the id of the deep organization's n-th seeded flow. The ids
// are predictable so that pgbench's scripts can name the same flows the HTTP
// scenarios ask for; they are valid version-7 UUIDs.
func seededID(n int) string { return fmt.Sprintf("00000000-0000-7000-8000-%012x", n) }

// seedDeep gives the deep organization o.deepFlows flows and their consent
// requests with COPY, not through the API: a million creates through the API
// would take longer than the whole benchmark. Each row's personal data is
// sealed with the test data key exactly as flowd seals it (the flow id is
// part of the sealed context, so one flow's sealed columns cannot simply be
// copied to another), so every row reads back through the API. It also takes
// the pgbench variables from one flow created through the API.
func (b *bench) seedDeep(ctx context.Context) error {
	if err := b.samplePgVars(ctx); err != nil {
		return err
	}
	n := b.o.deepFlows
	start := time.Now()
	fmt.Fprintf(b.out, "seeding %d flows of the deep organization with COPY\n", n)
	sealer, err := pii.New(mustDecode(testDataKey))
	if err != nil {
		return err
	}
	// Newest is flow n, created a minute ago; each older one a millisecond before.
	newest := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		conn, err := pgx.Connect(gctx, b.dbURL)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(gctx))
		i := 0
		_, err = conn.CopyFrom(gctx, pgx.Identifier{"flows"}, []string{"id", "organization_id", "flow_number", "reference_id",
			"sandbox", "pii_key_id", "national_id_sealed", "national_id_hmac", "last_name_sealed", "redirect_url",
			"process_instance_id", "flow_definition_id", "flow_definition_version", "created_by", "created_at", "updated_at", "expires_at"},
			pgx.CopyFromFunc(func() ([]any, error) {
				if i == n {
					return nil, nil
				}
				i++
				id := seededID(i)
				nationalID := "BENCH" + strconv.Itoa(i)
				at := newest.Add(-time.Duration(n-i) * time.Millisecond)
				return []any{uuid.MustParse(id), b.deep.ID, int64(i), b.deep.Prefix + "-" + strconv.Itoa(i),
					false, sealer.KeyID(), sealer.Seal(nationalID, "flow:"+id+":nationalId"), sealer.Hash("nationalId", nationalID),
					sealer.Seal("Nordmann", "flow:"+id+":lastName"), "https://example.com/done",
					uuid.New(), consent.DefaultDefinitionID, int32(1), b.deep.ClientID, at, at, at.Add(30 * 24 * time.Hour)}, nil
			}))
		return err
	})
	g.Go(func() error {
		conn, err := pgx.Connect(gctx, b.dbURL)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(gctx))
		i := 0
		tok := make([]byte, 32)
		_, err = conn.CopyFrom(gctx, pgx.Identifier{"consent_requests"}, []string{"flow_id", "organization_id", "token_hash",
			"pii_key_id", "token_sealed"},
			pgx.CopyFromFunc(func() ([]any, error) {
				if i == n {
					return nil, nil
				}
				i++
				id := seededID(i)
				_, _ = rand.Read(tok)
				token := base64.RawURLEncoding.EncodeToString(tok)
				h := sha256.Sum256([]byte(token))
				return []any{uuid.MustParse(id), b.deep.ID, h[:], sealer.KeyID(), sealer.Seal(token, "consent:"+id+":token")}, nil
			}))
		return err
	})
	if err := g.Wait(); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	// The organization's flow-number sequence continues after the seeded
	// numbers. flowd's inserts call for the next number on the node that
	// holds the organization's flows (on Citus, a worker), so the sequence
	// is set by a statement that reads them, which runs there too.
	if _, err := conn.Exec(ctx, `select flowd_next_flow_number(organization_id), setval(('flow_number_' || md5(organization_id))::regclass, $2)
		from flows where organization_id = $1 limit 1`, b.deep.ID, int64(n)); err != nil {
		return err
	}
	b.note("seeded %d flows and consent requests with COPY in %s", n, time.Since(start).Round(100*time.Millisecond))
	fmt.Fprintf(b.out, "  seeded in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// samplePgVars creates one flow through the API and takes pgbench's
// variables from its row: its sealed columns are what pgbench's inserts
// write, so they carry the same bytes a real create does.
func (b *bench) samplePgVars(ctx context.Context) error {
	body, err := b.do(ctx, b.main, "POST", "/api/flows", createBody(0, ""), 201)
	if err != nil {
		return err
	}
	var created struct {
		FlowID string `json:"flowId"`
	}
	if err := json.Unmarshal(body, &created); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	// The flow is sealed under its person's key; the key, under the data
	// key that also seals the consent link.
	var keyID, indexKey string
	var ni, nh, ln, tok, keySealed, keyNI []byte
	err = conn.QueryRow(ctx, `select s.pii_key_id, f.national_id_sealed, f.national_id_hmac, f.last_name_sealed, c.token_sealed,
			s.key_sealed, s.national_id_sealed, coalesce(s.person_index_key, '')
		from flows f join consent_requests c on c.organization_id = f.organization_id and c.flow_id = f.id
		join subject_keys s on s.organization_id = f.organization_id and s.id = f.subject_key_id where f.id = $1`,
		created.FlowID).Scan(&keyID, &ni, &nh, &ln, &tok, &keySealed, &keyNI, &indexKey)
	if err != nil {
		return err
	}
	b.pgVars = map[string]string{
		"keyid": keyID, "nisealed": hexBytea(ni), "nihmac": hexBytea(nh), "lnsealed": hexBytea(ln), "toksealed": hexBytea(tok),
		"keysealed": hexBytea(keySealed), "sknisealed": hexBytea(keyNI), "pindexkey": indexKey,
	}
	return nil
}

// createBody is a create request; each one names a different person.
func createBody(i int, webhookURL string) []byte {
	m := map[string]string{
		"nationalId": "B" + strconv.Itoa(i), "lastName": "Nordmann", "redirectUrl": "https://example.com/done",
		"referenceName": "flowbench",
	}
	if webhookURL != "" {
		m["webhookUrl"] = webhookURL
	}
	b, _ := json.Marshal(m)
	return b
}

// settle vacuums and analyzes the tables the seed made large before a
// scenario: the inserts of the scenarios before it would otherwise make
// autovacuum due on them, and it would run in this scenario's turns, taking
// the cores from whichever of flowd and pgbench had them. River's tables are
// left to autovacuum: analyzed while nearly empty, river_job's statistics
// make PostgreSQL plan River's job fetch as a nested loop over sequential
// scans, which slows as deliveries fill the table, until autovacuum
// analyzes it again (within a minute, longer than a scenario).
func (b *bench) settle(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `vacuum analyze flows, consent_requests, flow_tasks`); err != nil {
		return fmt.Errorf("vacuum analyze: %w", err)
	}
	return nil
}
