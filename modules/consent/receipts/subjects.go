package receipts

import (
	"context"

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
