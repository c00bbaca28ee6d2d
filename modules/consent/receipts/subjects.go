package receipts

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// SubjectTx returns the receipt subject in organizationID of person, a
// national id in its canonical form, as its receipts name the person,
// making the organization's salt in tx on first use: an erasure names the
// person by it.
func (s *Service) SubjectTx(ctx context.Context, tx database.Tx, organizationID, person string) (string, error) {
	salt, err := s.saltTx(ctx, tx, organizationID)
	if err != nil {
		return "", err
	}
	return subjectHash(salt, person), nil
}

// Subject returns the receipt subject in organizationID of person, as
// SubjectTx does, in a transaction of its own: the consent record names
// the person by it, also before their first receipt.
func (s *Service) Subject(ctx context.Context, organizationID, person string) (string, error) {
	if salt := s.cachedSalt(organizationID); salt != nil {
		return subjectHash(salt, person), nil
	}
	var subject string
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) (err error) {
		subject, err = s.SubjectTx(ctx, tx, organizationID, person)
		return err
	})
	return subject, err
}
