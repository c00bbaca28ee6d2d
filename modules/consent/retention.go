package consent

import (
	"context"

	"github.com/flowd/flowd/modules/consent/internal/definitions"
	"github.com/flowd/flowd/modules/flows"
)

var _ flows.Retentions = (*DefinitionStore)(nil)

// RetentionRules implements flows.Retentions: every definition version's
// retention, a week counted as seven days.
func (s *DefinitionStore) RetentionRules(ctx context.Context) ([]flows.RetentionRule, error) {
	rows, err := definitions.Retentions(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	out := make([]flows.RetentionRule, 0, len(rows))
	for _, r := range rows {
		v, err := ParseValidity(r.Retention)
		if err != nil || v.IsZero() {
			continue // stored valid; an unreadable one keeps its flows
		}
		out = append(out, flows.RetentionRule{OrganizationID: r.OrganizationID, DefinitionID: r.DefinitionID, Version: r.Version,
			Years: v.Years, Months: v.Months, Days: 7*v.Weeks + v.Days})
	}
	return out, nil
}
