package ssf

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/ssf/internal/store"
)

// Poll implements Streams (RFC 8936 §2.4): acknowledgements and errors are
// recorded first, then the stream's pending SETs are returned, oldest
// first. A SET returned and not acknowledged is returned again by the next
// poll. A paused stream holds its SETs: a poll returns none of them.
func (m *Module) Poll(ctx context.Context, organizationID, id string, req PollRequest) (PollResult, error) {
	if err := validatePoll(req); err != nil {
		return PollResult{}, err
	}
	s, err := m.Stream(ctx, organizationID, id)
	if err != nil {
		return PollResult{}, err
	}
	if s.Delivery.Method != DeliveryPoll {
		return PollResult{}, apperr.New(apperr.Invalid, "The stream's delivery is push (%s): it is not polled.", DeliveryPush)
	}
	if len(req.Ack) > 0 {
		if _, err := store.Settle(ctx, m.pool, organizationID, id, req.Ack, nil, "", ""); err != nil {
			return PollResult{}, err
		}
	}
	for _, jti := range slices.Sorted(maps.Keys(req.SetErrs)) {
		e := req.SetErrs[jti]
		if _, err := store.Settle(ctx, m.pool, organizationID, id, []string{jti}, nil, e.Err, e.Description); err != nil {
			return PollResult{}, err
		}
	}
	out := PollResult{SETs: map[string]string{}}
	if req.MaxEvents == 0 || s.Status != Enabled {
		return out, nil
	}
	var deadline time.Time
	if !req.ReturnImmediately {
		deadline = time.Now().Add(m.opts.LongPoll)
	}
	for {
		pending, err := store.Pending(ctx, m.pool, organizationID, id, req.MaxEvents+1)
		if err != nil {
			return PollResult{}, err
		}
		if len(pending) > 0 || !time.Now().Before(deadline) {
			for i, set := range pending {
				if i == req.MaxEvents {
					out.MoreAvailable = true
					break
				}
				out.SETs[set.JTI] = set.JWS
			}
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, nil
		case <-time.After(m.opts.PollEvery):
		}
	}
}

func validatePoll(req PollRequest) error {
	var f apperr.Fields
	if req.MaxEvents < 0 || req.MaxEvents > MaxPollEvents {
		f.Add("maxEvents", "must be from 0 to %d", MaxPollEvents)
	}
	if len(req.Ack) > MaxPollEvents {
		f.Add("ack", "must name at most %d SETs", MaxPollEvents)
	}
	for _, jti := range req.Ack {
		if !validStreamID(jti) {
			f.Add("ack", "must name SETs by their jti")
			break
		}
	}
	if len(req.SetErrs) > MaxPollEvents {
		f.Add("setErrs", "must name at most %d SETs", MaxPollEvents)
	}
	for jti, e := range req.SetErrs {
		if !validStreamID(jti) || e.Err == "" || len(e.Err) > 100 || len(e.Description) > MaxReason {
			f.Add("setErrs", `must map each SET's jti to {"err": "<code>", "description": "<text>"}`)
			break
		}
	}
	return f.Err()
}
