package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// seedPages inserts n flows of org-a, flow i created i seconds after the
// first, and returns the store's reads, which count their reads in reads.
func seedPages(t *testing.T, n int) (*pgxpool.Pool, *SharedReads, *atomic.Int64) {
	t.Helper()
	pool := dbtest.New(t)
	if _, err := pool.Exec(context.Background(), `
		insert into flows (id, organization_id, flow_number, reference_id, sandbox, pii_key_id,
			national_id_sealed, national_id_hmac, last_name_sealed, redirect_url, process_instance_id, flow_definition_id,
			flow_definition_version, created_by, expires_at, created_at)
		select ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, 'org-a', i, 'REF-' || i, false, 'k',
			'\x00', '\x00', '\x00', 'https://x.example', gen_random_uuid(), 'consent', 1, 'test',
			now() + interval '1 day', now() - interval '1 day' + i * interval '1 second'
		from generate_series(1, $1) i`, n); err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	return pool, NewSharedReads(pool, 2, func(n int) { reads.Add(int64(n)) }), &reads
}

func numbers(page []FlowSummary) []int64 {
	n := make([]int64, len(page))
	for i, f := range page {
		n[i] = f.Number
	}
	return n
}

// TestAPageFromARememberedCursorIsTheLookedUpOne: a cursor met for the
// first time is looked up in a read of its own, and its position
// remembered; the same page again takes one read, from the remembered
// position, and has the same flows, either way; so has a page from the
// end of a page served before.
func TestAPageFromARememberedCursorIsTheLookedUpOne(t *testing.T) {
	t.Parallel()
	_, r, reads := seedPages(t, 30)
	ctx := context.Background()
	for _, c := range []struct {
		backwards      bool
		cursor, farEnd int
		want           []int64
	}{{false, 15, 10, []int64{14, 13, 12, 11, 10}}, {true, 22, 27, []int64{27, 26, 25, 24, 23}}} {
		backwards := c.backwards
		q := ListQuery{OrganizationID: "org-a", Limit: 5, CursorID: seededID(c.cursor), Backwards: backwards}
		if _, known := r.positions.Get(flowRef{q.OrganizationID, q.CursorID}); known {
			t.Fatal("a cursor never met is remembered")
		}
		before := reads.Load()
		looked, moreLooked, err := r.ListFlows(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		lookingUp := reads.Load() - before
		if _, known := r.positions.Get(flowRef{q.OrganizationID, q.CursorID}); !known {
			t.Fatal("the cursor's position is not remembered")
		}
		before = reads.Load()
		given, moreGiven, err := r.ListFlows(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if remembered := reads.Load() - before; lookingUp != 2 || remembered != 1 {
			t.Errorf("backwards %v: %d reads for the page from a cursor met for the first time, %d from it remembered; want 2 and 1",
				backwards, lookingUp, remembered)
		}
		want := c.want
		if !slices.Equal(numbers(looked), want) || !slices.Equal(numbers(given), want) || !moreLooked || !moreGiven {
			t.Errorf("backwards %v: looked up %v (more %v), from the remembered position %v (more %v), want %v and more",
				backwards, numbers(looked), moreLooked, numbers(given), moreGiven, want)
		}
		if _, known := r.positions.Get(flowRef{q.OrganizationID, seededID(c.farEnd)}); !known {
			t.Errorf("backwards %v: the page's far end is not remembered as a cursor", backwards)
		}
	}
	// The first page's end is the second page's cursor.
	first, _, err := r.ListFlows(ctx, ListQuery{OrganizationID: "org-a", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := r.ListFlows(ctx, ListQuery{OrganizationID: "org-a", Limit: 5, CursorID: first[4].ID})
	if err != nil || !slices.Equal(numbers(second), []int64{25, 24, 23, 22, 21}) {
		t.Fatalf("the second page = %v, %v", numbers(second), err)
	}
}

// TestARememberedCursorIsCheckedStill: a cursor whose position is
// remembered is still no flow once deleted, and another organization's
// cursor is no flow of this one; a cursor the filters leave out pages on.
func TestARememberedCursorIsCheckedStill(t *testing.T) {
	t.Parallel()
	pool, r, _ := seedPages(t, 12)
	ctx := context.Background()
	first, _, err := r.ListFlows(ctx, ListQuery{OrganizationID: "org-a", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	gone, archived := first[4].ID, first[0].ID
	if err := DeleteFlow(ctx, pool, "org-a", gone); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `update flows set process_status = 'completed', version = version + 1 where id = $1`, archived); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.ListFlows(ctx, ListQuery{OrganizationID: "org-a", Limit: 5, CursorID: gone}); !errors.Is(err, database.ErrNotFound) {
		t.Errorf("a page after a deleted flow remembered as a cursor = %v, want database.ErrNotFound", err)
	}
	if _, _, err := r.ListFlows(ctx, ListQuery{OrganizationID: "org-b", Limit: 5, CursorID: archived}); !errors.Is(err, database.ErrNotFound) {
		t.Errorf("a page of org-b after org-a's flow = %v, want database.ErrNotFound", err)
	}
	page, more, err := r.ListFlows(ctx, ListQuery{OrganizationID: "org-a", Limit: 5, CursorID: archived})
	if err != nil || !slices.Equal(numbers(page), []int64{11, 10, 9, 7, 6}) || !more {
		t.Errorf("a page after a flow archived since = %v (more %v), %v; want 11 to 6 but the deleted 8, and more", numbers(page), more, err)
	}
}

// TestPositionsKeepTheMostRecent: positions hold at least the last half
// of maxPositions remembered, and never more than maxPositions.
func TestPositionsKeepTheMostRecent(t *testing.T) {
	t.Parallel()
	p := NewSharedReads(nil, 1, nil).positions
	for i := range 3 * maxPositions / 2 {
		p.Put(flowRef{"org-a", fmt.Sprint(i)}, time.Time{})
	}
	half := maxPositions / 2
	for _, c := range []struct {
		i    int
		want bool
	}{{0, false}, {half - 1, false}, {half, true}, {3*half - 1, true}} {
		if _, ok := p.Get(flowRef{"org-a", fmt.Sprint(c.i)}); ok != c.want {
			t.Errorf("position %d held: %v, want %v", c.i, ok, c.want)
		}
	}
	if n := p.Len(); n > maxPositions {
		t.Errorf("%d positions held, want at most %d", n, maxPositions)
	}
}
