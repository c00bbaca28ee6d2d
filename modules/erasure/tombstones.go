package erasure

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/erasure/internal/store"
	"github.com/flowd/flowd/modules/identity"
)

// Tombstone is an erasure as "flowd erasures export" writes it, one JSON
// object a line: enough to erase the person again in a database restored
// from a backup taken before, and to put the erasure and its receipt back.
// It names the person only by keyed hashes.
type Tombstone struct {
	ErasureID      string     `json:"erasureId"`
	OrganizationID string     `json:"organizationId"`
	Subject        string     `json:"subject"`
	SubjectKey     string     `json:"subjectKey"` // base64url, no padding
	FlowCount      int        `json:"flowCount"`
	KeepReceipts   bool       `json:"keepReceipts"`
	KeyDestroyedAt *time.Time `json:"keyDestroyedAt"` // null: the person had no key of their own
	ErasedBy       string     `json:"erasedBy"`
	ErasedAt       time.Time  `json:"erasedAt"`
	Receipt        string     `json:"receipt"`
}

// Export writes every tombstone of every organization to w as JSON lines,
// oldest first, and returns how many.
func (m *Module) Export(ctx context.Context, w io.Writer) (int, error) {
	rows, err := store.All(ctx, m.pool)
	if err != nil {
		return 0, err
	}
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(Tombstone{ErasureID: r.ID, OrganizationID: r.OrganizationID, Subject: r.Subject,
			SubjectKey: base64.RawURLEncoding.EncodeToString(r.SubjectKey), FlowCount: r.FlowCount, KeepReceipts: r.KeepReceipts,
			KeyDestroyedAt: utc(r.KeyDestroyedAt), ErasedBy: r.ErasedBy, ErasedAt: r.ErasedAt.UTC(), Receipt: r.Receipt}); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}

// maxExportLine bounds one line of an export: a tombstone is well under
// two kilobytes.
const maxExportLine = 64 << 10

// ReadTombstones reads an export, refusing it whole, with the line at
// fault, when any line is not a tombstone.
func ReadTombstones(r io.Reader) ([]Tombstone, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxExportLine)
	var out []Tombstone
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var t Tombstone
		if err := dec.Decode(&t); err != nil {
			return nil, fmt.Errorf("%w: line %d is not a tombstone: %w", errInvalidExport, n, err)
		}
		if msg := t.problem(); msg != "" {
			return nil, fmt.Errorf("%w: line %d: %s", errInvalidExport, n, msg)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidExport, err)
	}
	return out, nil
}

// problem says what is wrong with t, or "".
func (t Tombstone) problem() string {
	key, err := base64.RawURLEncoding.DecodeString(t.SubjectKey)
	switch {
	case uuid.Validate(t.ErasureID) != nil:
		return "erasureId is not an erasure id"
	case t.OrganizationID == "":
		return "organizationId is missing"
	case t.Subject == "":
		return "subject is missing"
	case err != nil || len(key) != 32:
		return "subjectKey is not a subject key"
	case t.FlowCount < 0:
		return "flowCount is negative"
	case t.ErasedAt.IsZero():
		return "erasedAt is required"
	case t.ErasedBy == "" || t.Receipt == "":
		return "erasedBy and receipt are required"
	}
	return ""
}

// Reapplied is what Reapply did for one tombstone.
type Reapplied struct {
	Tombstone Tombstone
	// Flows is how many of the person's flows it erased again; 0 when the
	// database held none (the person was erased already).
	Flows int
	// Restored: the tombstone was missing and is back.
	Restored bool
}

// Reapply erases again, in one transaction per organization, every person
// of tombstones whose flows the database still holds (a restore from a
// backup taken before their erasure), puts back the tombstones it lacks,
// with the receipts they kept, and audits each repetition. Each
// organization's flows are read once, whatever the number of its
// tombstones.
func (m *Module) Reapply(ctx context.Context, tombstones []Tombstone) ([]Reapplied, error) {
	var orgs []string
	byOrg := map[string][]Tombstone{}
	for _, t := range tombstones {
		if _, ok := byOrg[t.OrganizationID]; !ok {
			orgs = append(orgs, t.OrganizationID)
		}
		byOrg[t.OrganizationID] = append(byOrg[t.OrganizationID], t)
	}
	var out []Reapplied
	for _, org := range orgs {
		done, err := m.reapplyOrganization(ctx, org, byOrg[org])
		if err != nil {
			return out, fmt.Errorf("erasure: reapply in organization %s: %w", org, err)
		}
		out = append(out, done...)
	}
	return out, nil
}

func (m *Module) reapplyOrganization(ctx context.Context, org string, tombstones []Tombstone) ([]Reapplied, error) {
	byKey := map[string]int{}
	for i, t := range tombstones {
		key, _ := base64.RawURLEncoding.DecodeString(t.SubjectKey)
		byKey[string(key)] = i
	}
	out := make([]Reapplied, len(tombstones))
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		nationalIDs := map[string]string{} // by subject key, the canonical forms of the people found
		// A tombstone made before canonical forms may be keyed by an older
		// form of the person's id (forms after the first), as its erasure
		// found them then.
		erased, err := m.flows.EraseMatchingTx(ctx, tx, org, "operator", func(forms []string) string {
			for _, form := range forms {
				key := string(m.subjectKeyOf(org, form))
				if _, ok := byKey[key]; ok {
					nationalIDs[key] = forms[0]
					return key
				}
			}
			return ""
		})
		if err != nil {
			return err
		}
		for key, i := range byKey {
			t := tombstones[i]
			e := Erasure{ID: t.ErasureID, OrganizationID: org, Subject: t.Subject, FlowCount: t.FlowCount,
				KeepReceipts: t.KeepReceipts, KeyDestroyedAt: t.KeyDestroyedAt, ErasedBy: t.ErasedBy, ErasedAt: t.ErasedAt, Receipt: t.Receipt}
			restored, err := store.InsertErasure(ctx, tx, toRow(e, []byte(key)))
			if err != nil {
				return err
			}
			found := erased[key]
			if nationalID, ok := nationalIDs[key]; ok {
				if _, _, err := m.keys.DestroySubjectKeyTx(ctx, tx, org, nationalID); err != nil {
					return err
				}
			}
			out[i] = Reapplied{Tombstone: t, Flows: len(found.Deletions), Restored: restored}
			if len(found.Deletions) == 0 {
				continue
			}
			if err := m.keepTx(ctx, tx, &e, found); err != nil {
				return err
			}
			if err := m.audit.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: org, Actor: "operator",
				Action: identity.AuditSubjectEraseReapplied, Target: t.ErasureID,
				Detail: fmt.Sprintf("%d flows erased again after a restore", len(found.Deletions))}); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}
