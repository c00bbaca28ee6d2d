package flows_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/flows/rekey"
)

// sealedOf returns what flows holds of a flow's personal data.
func (b *bundle) sealedOf(t *testing.T, flowID string) (keyID string, nationalID, lastName []byte) {
	t.Helper()
	if err := b.pool.QueryRow(context.Background(), `select pii_key_id, national_id_sealed, last_name_sealed
		from flows where id = $1`, flowID).Scan(&keyID, &nationalID, &lastName); err != nil {
		t.Fatal(err)
	}
	return keyID, nationalID, lastName
}

// opensWithDataKey reports whether either sealed value of the flow opens
// with the data key alone.
func (b *bundle) opensWithDataKey(t *testing.T, flowID string) bool {
	t.Helper()
	_, nationalID, lastName := b.sealedOf(t, flowID)
	_, errN := b.sealer.Open(b.sealer.KeyID(), nationalID, "flow:", flowID, ":", "nationalId")
	_, errL := b.sealer.Open(b.sealer.KeyID(), lastName, "flow:", flowID, ":", "lastName")
	return errN == nil || errL == nil
}

// subjectKeyOf returns the id of the subject key a flow is sealed under, ""
// when it has none.
func (b *bundle) subjectKeyOf(t *testing.T, flowID string) string {
	t.Helper()
	var id *string
	if err := b.pool.QueryRow(context.Background(), `select subject_key_id::text from flows where id = $1`, flowID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if id == nil {
		return ""
	}
	return *id
}

// destroy destroys the subject key of nationalID in organizationID in a
// transaction of its own.
func (b *bundle) destroy(t *testing.T, organizationID, nationalID string) (time.Time, bool) {
	t.Helper()
	var at time.Time
	var found bool
	err := b.inTx(func(tx pgx.Tx) error {
		var err error
		at, found, err = b.flows.DestroySubjectKeyTx(context.Background(), tx, organizationID, nationalID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return at, found
}

// TestAFlowsPersonalDataDoesNotOpenWithTheDataKeyAlone: a new flow's
// national id and last name are sealed under its person's key, which the
// data key seals; the data key alone opens neither, and the key's row holds
// nothing of the person in the clear.
func TestAFlowsPersonalDataDoesNotOpenWithTheDataKeyAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.create(t, newFlow("12345678901"))
	if f := b.get(t, c.FlowID); f.NationalID != "12345678901" || f.LastName != "Nordmann" {
		t.Fatalf("the flow reads as %q %q", f.NationalID, f.LastName)
	}
	if b.opensWithDataKey(t, c.FlowID) {
		t.Error("the flow's personal data opens with the data key alone")
	}
	keyID, nationalID, lastName := b.sealedOf(t, c.FlowID)
	if keyID == b.sealer.KeyID() || bytes.Contains(nationalID, []byte("12345678901")) || bytes.Contains(lastName, []byte("Nordmann")) {
		t.Errorf("the flow is sealed under %q: %x %x", keyID, nationalID, lastName)
	}
	var row []byte
	if err := b.pool.QueryRow(context.Background(), `select convert_to(s::text, 'UTF8') from subject_keys s`).Scan(&row); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(row, []byte("12345678901")) || bytes.Contains(row, []byte("123456789")) {
		t.Errorf("the subject key's row holds the national id: %s", row)
	}
}

// TestADestroyedSubjectKeyOpensNothingOfThePerson: once a person's key in
// an organization is destroyed, none of their flows there reads (not by
// Get, not in a list, not on the person's page), at once also on another
// instance that had the key in memory; another person's flows and the same
// person's flows in another organization read as before, and the person's
// next flow there gets a new key, also when made on the instance that
// had the old one in memory.
func TestADestroyedSubjectKeyOpensNothingOfThePerson(t *testing.T) {
	t.Parallel()
	index := nationalid.NewBlindIndex(bytes.Repeat([]byte{3}, 32), nationalid.Format{})
	b := setup(t, func(c *flows.Config) { c.PersonIndex = index })
	ctx := context.Background()
	other := instance(b.pool, b.sealer, func(c *flows.Config) { c.PersonIndex = index })

	mine := []string{b.create(t, newFlow("12345678901")).FlowID, other.create(t, newFlow("123456-78901")).FlowID}
	someoneElse := b.create(t, newFlow("10987654321")).FlowID
	atB := *b
	atB.caller = flows.Caller{OrganizationID: "org-b", ClientID: "client-b"}
	elsewhere := atB.create(t, newFlow("12345678901")).FlowID
	// The other instance reads and lists the flows: it holds their keys.
	for range 2 {
		if page, err := other.flows.List(ctx, other.caller, flows.ListParams{Limit: 10}); err != nil || len(page.Flows) != 3 {
			t.Fatalf("the other instance lists %d flows, %v", len(page.Flows), err)
		}
		for _, id := range mine {
			other.get(t, id)
		}
	}

	at, found := b.destroy(t, "org-a", "123456-78901")
	if !found || at.IsZero() {
		t.Fatalf("DestroySubjectKeyTx = %v, %v; want the key found", at, found)
	}
	for _, on := range []*bundle{b, other} {
		for _, id := range mine {
			if _, err := on.flows.Get(ctx, on.caller, id); !errors.Is(err, flows.ErrNotFound) {
				t.Errorf("Get of the erased person's flow %s: %v; want ErrNotFound", id, err)
			}
		}
		page, err := on.flows.List(ctx, on.caller, flows.ListParams{Limit: 10})
		if err != nil || len(page.Flows) != 1 {
			t.Errorf("an instance lists %d flows (%v), the erased person's among them", len(page.Flows), err)
		}
	}
	page, err := b.flows.List(ctx, b.caller, flows.ListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Flows) != 1 || page.Flows[0].ID != someoneElse {
		t.Errorf("the list shows %d flows, want only %s", len(page.Flows), someoneElse)
	}
	if f := b.get(t, someoneElse); f.NationalID != "10987654321" {
		t.Errorf("another person's flow reads %q", f.NationalID)
	}
	if f := atB.get(t, elsewhere); f.NationalID != "12345678901" {
		t.Errorf("the person's flow in another organization reads %q", f.NationalID)
	}
	ofPerson, err := b.flows.FlowsOfPerson(ctx, "12345678901")
	if err != nil || !slices.Equal(flowIDs(ofPerson), []string{elsewhere}) {
		t.Errorf("the person's page finds %v, %v; want only %s", flowIDs(ofPerson), err, elsewhere)
	}
	var left int
	if err := b.pool.QueryRow(ctx, `select count(*) from subject_keys where destroyed_at is not null
		and (key_sealed is not null or national_id_sealed is not null or person_index is not null)`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d destroyed keys keep something of the person (%v)", left, err)
	}

	// Again: nothing is left to destroy.
	if _, found := b.destroy(t, "org-a", "12345678901"); found {
		t.Error("a second destruction found a key")
	}
	// The person's next flow there has a key of its own, also on the
	// instance that made a flow under the old one.
	next := other.create(t, newFlow("12345678901")).FlowID
	if f := b.get(t, next); f.NationalID != "12345678901" {
		t.Errorf("the person's next flow reads %q", f.NationalID)
	}
	if b.subjectKeyOf(t, next) == b.subjectKeyOf(t, mine[0]) {
		t.Error("the person's next flow is sealed under the destroyed key")
	}
	if _, err := b.flows.Get(ctx, b.caller, mine[0]); !errors.Is(err, flows.ErrNotFound) {
		t.Errorf("the new key opens the old flow: %v", err)
	}
	if _, found := b.destroy(t, "org-a", "55555555555"); found {
		t.Error("a person without flows had a key")
	}
}

// TestConcurrentCreatesForOnePersonShareOneKey: creates for one person that
// race each make their key, and one wins: every flow is sealed under it.
func TestConcurrentCreatesForOnePersonShareOneKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	second := instance(b.pool, b.sealer)
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		on := b
		if i%2 == 1 {
			on = second
		}
		wg.Go(func() {
			c, err := on.flows.Create(context.Background(), on.caller, newFlow([]string{"12345678901", "123456-78901"}[i%2]))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = c.FlowID
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	keys := map[string]bool{}
	for _, id := range ids {
		keys[b.subjectKeyOf(t, id)] = true
		if f := b.get(t, id); f.NationalID == "" {
			t.Errorf("flow %s does not read", id)
		}
	}
	if len(keys) != 1 || keys[""] {
		t.Errorf("the person's flows are sealed under %d keys: %v", len(keys), keys)
	}
	if got := b.count(t, `select count(*) from subject_keys`); got != 1 {
		t.Errorf("%d subject keys stored, want 1", got)
	}
}

// makeOld seals a flow as flowd did before subject keys: under the data key
// itself, with the flow's own blind index, and no subject key.
func (b *bundle) makeOld(t *testing.T, flowID string, index *nationalid.BlindIndex) {
	t.Helper()
	f := b.get(t, flowID)
	var pindex []byte
	var pkey *string
	if index != nil {
		v := index.Version()
		pindex, pkey = index.Of(f.NationalID), &v
	}
	if _, err := b.pool.Exec(context.Background(), `update flows set subject_key_id = null, pii_key_id = $2,
		national_id_sealed = $3, national_id_hmac = $4, last_name_sealed = $5, person_index = $6, person_index_key = $7
		where id = $1`, flowID, b.sealer.KeyID(),
		b.sealer.Seal(f.NationalID, "flow:", flowID, ":", "nationalId"), b.sealer.Hash("nationalId", f.NationalID),
		b.sealer.Seal(f.LastName, "flow:", flowID, ":", "lastName"), pindex, pkey); err != nil {
		t.Fatal(err)
	}
}

// TestRekeyMovesOlderFlowsUnderTheirPersonsKeyAndResumes: flows sealed
// under the data key are moved under their person's key, one key per
// person and organization, batch by batch; a run stopped after a batch is
// carried on by a new one, which finds only what is left; afterwards every
// flow reads as before, the person's page finds them by their key, and
// destroying the key reaches them.
func TestRekeyMovesOlderFlowsUnderTheirPersonsKeyAndResumes(t *testing.T) {
	t.Parallel()
	index := nationalid.NewBlindIndex(bytes.Repeat([]byte{5}, 32), nationalid.Format{})
	b := setup(t, func(c *flows.Config) { c.PersonIndex = index })
	ctx := context.Background()
	var ids []string
	for _, person := range []string{"12345678901", "123456-78901", "10987654321", "12345678901", "55555555555"} {
		ids = append(ids, b.create(t, newFlow(person)).FlowID)
	}
	atB := *b
	atB.caller = flows.Caller{OrganizationID: "org-b", ClientID: "client-b"}
	ids = append(ids, atB.create(t, newFlow("12345678901")).FlowID)
	for _, id := range ids[:5] {
		b.makeOld(t, id, index)
	}
	atB.makeOld(t, ids[5], index)
	if _, err := b.pool.Exec(ctx, `delete from subject_keys`); err != nil {
		t.Fatal(err)
	}
	if !b.opensWithDataKey(t, ids[0]) {
		t.Fatal("makeOld did not seal the flow under the data key")
	}

	first := rekey.NewRekeyer(b.pool, b.sealer, index, nationalid.Format{})
	if n, err := first.Remaining(ctx); err != nil || n != 6 {
		t.Fatalf("Remaining = %d, %v; want 6", n, err)
	}
	if n, err := first.RekeyBatch(ctx, 2); err != nil || n != 2 {
		t.Fatalf("first batch: %d, %v", n, err)
	}
	// Interrupted: a new run finds only what is left.
	second := rekey.NewRekeyer(b.pool, b.sealer, index, nationalid.Format{})
	if n, _ := second.Remaining(ctx); n != 4 {
		t.Fatalf("after a batch of 2, %d remain, want 4", n)
	}
	total := 0
	for {
		n, err := second.RekeyBatch(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total != 4 {
		t.Errorf("the resumed run moved %d, want 4", total)
	}
	if n, _ := second.Remaining(ctx); n != 0 {
		t.Errorf("%d flows left under the data key", n)
	}
	for _, id := range ids {
		if b.opensWithDataKey(t, id) {
			t.Errorf("flow %s still opens with the data key", id)
		}
	}
	if f := b.get(t, ids[1]); f.NationalID != "123456-78901" || f.LastName != "Nordmann" {
		t.Errorf("a rekeyed flow reads %q %q", f.NationalID, f.LastName)
	}
	same := []string{b.subjectKeyOf(t, ids[0]), b.subjectKeyOf(t, ids[1]), b.subjectKeyOf(t, ids[3])}
	if same[0] == "" || same[0] != same[1] || same[0] != same[2] || same[0] == b.subjectKeyOf(t, ids[5]) || same[0] == b.subjectKeyOf(t, ids[2]) {
		t.Errorf("keys per flow: %v; want one per person and organization", same)
	}
	if got := b.count(t, `select count(*) from subject_keys`); got != 4 {
		t.Errorf("%d subject keys, want 4 (three people at org-a, one at org-b)", got)
	}
	if got := b.count(t, `select count(*) from flows where person_index is not null`); got != 0 {
		t.Errorf("%d flows keep an index of their own", got)
	}
	found, err := b.flows.FlowsOfPerson(ctx, "12345678901")
	if err != nil || len(found) != 4 {
		t.Errorf("the person's page finds %v, %v; want 4 flows", flowIDs(found), err)
	}
	// A new flow of a rekeyed person joins the key.
	if next := b.create(t, newFlow("12345678901")).FlowID; b.subjectKeyOf(t, next) != same[0] {
		t.Error("a new flow of a rekeyed person has a key of its own")
	}
	b.destroy(t, "org-a", "12345678901")
	if _, err := b.flows.Get(ctx, b.caller, ids[0]); !errors.Is(err, flows.ErrNotFound) {
		t.Errorf("a rekeyed flow of the erased person: %v", err)
	}
}

// TestRotatingTheDataKeyReSealsSubjectKeys: after a new data key, with the
// old one listed as previous, the re-seal seals every subject key anew and
// hashes its subject again; then the old key is not needed: flows read,
// the person's next flow joins their key, and destroying it works.
func TestRotatingTheDataKeyReSealsSubjectKeys(t *testing.T) {
	t.Parallel()
	oldRaw := make([]byte, 32)
	_, _ = rand.Read(oldRaw)
	oldSealer, err := pii.New(oldRaw)
	if err != nil {
		t.Fatal(err)
	}
	old := instance(setup(t).pool, oldSealer)
	ctx := context.Background()
	first := old.create(t, newFlow("12345678901")).FlowID
	old.create(t, newFlow("10987654321"))

	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	rotating, err := pii.New(raw, oldRaw)
	if err != nil {
		t.Fatal(err)
	}
	during := instance(old.pool, rotating)
	// While rotating, the person is found under the old subject still.
	if next := during.create(t, newFlow("12345678901")).FlowID; during.subjectKeyOf(t, next) != during.subjectKeyOf(t, first) {
		t.Error("a flow made during the rotation has a key of its own")
	}
	r := rekey.NewResealer(old.pool, rotating)
	if n, err := r.ResealSubjectKeysBatch(ctx, 1); err != nil || n != 1 {
		t.Fatalf("first batch: %d, %v", n, err)
	}
	total := 1
	for {
		n, err := r.ResealSubjectKeysBatch(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total != 2 {
		t.Errorf("re-sealed %d subject keys, want 2", total)
	}
	// The consent links are re-sealed too, as the command does.
	links := consent.NewRequests(old.pool, rotating, "https://flowd.example")
	for n := 1; n > 0; {
		if n, err = links.ResealBatch(ctx, 10); err != nil {
			t.Fatal(err)
		}
	}
	onlyNew, _ := pii.New(raw)
	after := instance(old.pool, onlyNew)
	if got := after.count(t, `select count(*) from subject_keys where pii_key_id <> $1`, onlyNew.KeyID()); got != 0 {
		t.Errorf("%d subject keys under the old data key", got)
	}
	if f := after.get(t, first); f.NationalID != "12345678901" {
		t.Errorf("after the rotation the flow reads %q", f.NationalID)
	}
	if next := after.create(t, newFlow("12345678901")).FlowID; after.subjectKeyOf(t, next) != after.subjectKeyOf(t, first) {
		t.Error("after the rotation the person's next flow has a key of its own")
	}
	if _, found := after.destroy(t, "org-a", "12345678901"); !found {
		t.Error("after the rotation the person's key is not found")
	}
	if _, err := after.flows.Get(ctx, after.caller, first); !errors.Is(err, flows.ErrNotFound) {
		t.Errorf("after the destruction: %v", err)
	}
}
