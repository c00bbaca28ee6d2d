package store

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// TestABatchCommandReadsEveryRowOnce: the flows a batch command reads after
// its cursor, batch by batch, are every flow it is after once, in the
// primary key's order, across organizations and whatever the batch's size:
// the rest of the cursor's organization first, then the organizations
// after it.
func TestABatchCommandReadsEveryRowOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	// org-b has keyed flows too, which the rekey is not after.
	var want []string
	for _, o := range []struct {
		org          string
		flows, keyed int
	}{{"org-a", 5, 0}, {"org-b", 1, 2}, {"org-c", 4, 0}} {
		if _, err := pool.Exec(ctx, `
			insert into flows (id, organization_id, flow_number, reference_id, sandbox, pii_key_id,
				national_id_sealed, national_id_hmac, last_name_sealed, redirect_url, process_instance_id, flow_definition_id,
				flow_definition_version, created_by, expires_at, subject_key_id)
			select ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, $1, i, 'REF-' || i, false, 'k',
				'\x00', '\x00', '\x00', 'https://x.example', gen_random_uuid(), 'consent', 1, 'test', now() + interval '1 day',
				case when i > $2::int then gen_random_uuid() end
			from generate_series(1, $2::int + $3::int) i`, o.org, o.flows, o.keyed); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= o.flows; i++ {
			want = append(want, fmt.Sprintf("%s/00000000-0000-7000-8000-%012x", o.org, i))
		}
	}
	for _, limit := range []int{1, 2, 3, 4, 6, 100} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			var got []string
			var after IndexCursor
			for range len(want) + 1 {
				batch, err := UnkeyedFlows(ctx, pool, after, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(batch) == 0 {
					break
				}
				if len(batch) > limit {
					t.Fatalf("a batch of %d flows, the limit %d", len(batch), limit)
				}
				for _, f := range batch {
					got = append(got, f.OrganizationID+"/"+f.ID)
				}
				last := batch[len(batch)-1]
				after = IndexCursor{OrganizationID: last.OrganizationID, ID: last.ID}
			}
			if !slices.Equal(got, want) {
				t.Errorf("read\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// TestABatchMakesAKeyOnlyForThoseWithout: the keys a rekey batch inserts
// are those of people without a live key under any of their subjects (the
// current data key's, or a previous one's), and the batch's flows of the
// others are left for their own keys.
func TestABatchMakesAKeyOnlyForThoseWithout(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	key := func(id, subject string) SubjectKey {
		return SubjectKey{OrganizationID: "org-a", ID: id, Subject: []byte(subject), KeyID: "k", KeySealed: []byte("sealed")}
	}
	// Ann has a key under her subject of the previous data key.
	if _, err := FindOrInsertSubjectKey(ctx, pool, key("00000000-0000-7000-8000-0000000000a0", "ann-before"),
		[][]byte{[]byte("ann-before")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		subjects []string
		want     bool // a key of the batch's is inserted
	}{
		{"keyed under a previous data key", []string{"ann-now", "ann-before"}, false},
		{"keyed under none", []string{"bob-now", "bob-before"}, true},
		{"one data key", []string{"cat-now"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("00000000-0000-7000-8000-%012x", len(tc.name))
			subjects := make([][]byte, len(tc.subjects))
			for i, s := range tc.subjects {
				subjects[i] = []byte(s)
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // nothing is kept
			if _, err := Rekey(ctx, tx, []NewSubjectKey{{Key: key(id, tc.subjects[0]), Subjects: subjects}},
				[]Rekeyed{{Flow: SealedFlow{OrganizationID: "org-a", ID: id, KeyID: "k"}, SubjectKeyID: id}}); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := tx.QueryRow(ctx, `select count(*) from subject_keys where organization_id = 'org-a' and id = $1`, id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if got := n == 1; got != tc.want {
				t.Errorf("the batch's key inserted: %v, want %v", got, tc.want)
			}
		})
	}
}
