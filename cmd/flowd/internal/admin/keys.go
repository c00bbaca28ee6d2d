package admin

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/rekey"
)

// runRotateDataKey handles "flowd keys rotate-data-key": it re-seals every
// sealed personal value (national ids and last names not yet under a
// subject key, the subject keys themselves, consent link tokens, the
// Shared Signals streams' push Authorization headers) under
// FLOWD_DATA_KEY, opening the old values with the keys in
// FLOWD_DATA_KEY_PREVIOUS. The rotation itself is a change of configuration:
// the operator makes the new key FLOWD_DATA_KEY, lists the old one in
// FLOWD_DATA_KEY_PREVIOUS, restarts the servers (which then seal new values
// under the new key and still read the old ones) and runs this command; once
// it reports nothing left, the old key may be dropped. Each batch commits on
// its own, so the command is idempotent and resumable: run it again after an
// interruption and it carries on where it stopped.
func runRotateDataKey(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("keys rotate-data-key", flag.ContinueOnError)
	batch := fs.Int("batch", 500, "rows re-sealed per transaction")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *batch < 1 || *batch > 10000 {
		return command.Usagef("keys rotate-data-key: --batch must be from 1 to 10000")
	}
	env, err := openAdmin(ctx, sys, config.Need{Secrets: true})
	if err != nil {
		return err
	}
	defer env.pool.Close()
	m, err := env.modules()
	if err != nil {
		return err
	}
	sealer, answers, requests := m.Sealer, m.Answers, m.Requests
	flowsResealer := rekey.NewResealer(env.pool, sealer)
	var total struct {
		KeyID           string `json:"keyId"`
		Flows           int    `json:"flows"`
		SubjectKeys     int    `json:"subjectKeys"`
		IdempotencyKeys int    `json:"idempotencyKeys"`
		ConsentRequests int    `json:"consentRequests"`
		SSFStreams      int    `json:"ssfStreams"`
	}
	total.KeyID = sealer.KeyID()
	for {
		n, err := flowsResealer.ResealBatch(ctx, *batch)
		if err != nil {
			return rotateDataKeyError(err)
		}
		total.Flows += n
		if n == 0 {
			break
		}
	}
	for {
		n, err := flowsResealer.ResealSubjectKeysBatch(ctx, *batch)
		if err != nil {
			return rotateDataKeyError(err)
		}
		total.SubjectKeys += n
		if n == 0 {
			break
		}
	}
	for {
		n, err := answers.ResealBatch(ctx, *batch)
		if err != nil {
			return rotateDataKeyError(err)
		}
		total.IdempotencyKeys += n
		if n == 0 {
			break
		}
	}
	for {
		n, err := requests.ResealBatch(ctx, *batch)
		if err != nil {
			return rotateDataKeyError(err)
		}
		total.ConsentRequests += n
		if n == 0 {
			break
		}
	}
	for {
		n, err := m.SSF.ResealBatch(ctx, *batch)
		if err != nil {
			return rotateDataKeyError(err)
		}
		total.SSFStreams += n
		if n == 0 {
			break
		}
	}
	if *asJSON {
		return command.PrintJSON(sys.Stdout, total)
	}
	fmt.Fprintf(sys.Stdout, "Every personal value is now sealed under data key %s (re-sealed: %d flows, %d subject keys, %d idempotency keys, %d consent requests, %d stream Authorization headers).\n"+
		"Keys in FLOWD_DATA_KEY_PREVIOUS are no longer needed for stored data.\n",
		total.KeyID, total.Flows, total.SubjectKeys, total.IdempotencyKeys, total.ConsentRequests, total.SSFStreams)
	return nil
}

func rotateDataKeyError(err error) error {
	if errors.Is(err, pii.ErrUnknownKey) {
		return fmt.Errorf("keys rotate-data-key: %w: list the key that sealed it in FLOWD_DATA_KEY_PREVIOUS", err)
	}
	return fmt.Errorf("keys rotate-data-key: %w", err)
}

// runKeysRotate handles "flowd keys rotate": new token-signing keys and a
// new receipt key, each signing from now on.
func runKeysRotate(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("keys rotate", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	env, err := openAdmin(ctx, sys, config.Need{Secrets: true})
	if err != nil {
		return err
	}
	defer env.pool.Close()
	made, err := env.Keys.RotateSigningKeys(ctx)
	if err != nil {
		return adminError(err)
	}
	type key struct {
		KeyID     string `json:"keyId"`
		Algorithm string `json:"algorithm"`
		Use       string `json:"use"` // "tokens" or "receipts"
	}
	out := make([]key, len(made))
	for i, k := range made {
		out[i] = key{KeyID: k.ID, Algorithm: k.Algorithm, Use: "tokens"}
		if k.Receipts {
			out[i].Use = "receipts"
		}
		if !*asJSON {
			what := "tokens"
			if k.Receipts {
				what = "consent receipts"
			}
			fmt.Fprintf(sys.Stdout, "New signing key %s (%s) signs %s from now on.\n", k.ID, k.Algorithm, what)
		}
	}
	if *asJSON {
		return command.PrintJSON(sys.Stdout, map[string]any{"keys": out})
	}
	fmt.Fprintln(sys.Stdout, "The previous keys stay in the JWKS until their tokens expire; receipt keys for FLOWD_RECEIPT_KEY_RETENTION.")
	return nil
}
