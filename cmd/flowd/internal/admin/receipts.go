package admin

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
)

// maxJWKS bounds what --jwks reads: a key set of many years of keys is
// still far smaller.
const maxJWKS = 1 << 20

// runReceiptsVerify handles "flowd receipts verify FILE [--jwks URL|FILE]":
// it checks a consent receipt against flowd's receipt keys, from this
// deployment's database, or offline against a key set given by URL or file.
func runReceiptsVerify(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("receipts verify", flag.ContinueOnError)
	jwksFrom := fs.String("jwks", "", "the JWKS to check against: an https URL (a flowd's /oauth/jwks) or a file; default: this deployment's keys")
	asJSON := fs.Bool("json", false, "print one JSON object, as POST /api/receipts/verify answers")
	file, err := command.ParseFlagsAndName(fs, args)
	if err != nil {
		return err
	}
	if file == "" {
		return errors.New("receipts verify: name the receipt's file (- for stdin)")
	}
	receipt, err := readInput(file, sys.Stdin, 64<<10)
	if err != nil {
		return fmt.Errorf("receipts verify: %w", err)
	}
	var keys jose.JSONWebKeySet
	issuer := ""
	if *jwksFrom != "" {
		if keys, err = loadJWKS(ctx, *jwksFrom); err != nil {
			return fmt.Errorf("receipts verify: --jwks: %w", err)
		}
	} else {
		env, openErr := openAdmin(ctx, sys, config.Need{})
		if openErr != nil {
			return openErr
		}
		defer env.pool.Close()
		if keys, err = env.Keys.ReceiptKeys(ctx); err != nil {
			return err
		}
		issuer = strings.TrimRight(env.cfg.BaseURL.String(), "/")
	}
	if erasure.IsReceipt(string(receipt)) {
		return printErasureReceipt(sys.Stdout, string(receipt), keys, issuer, *asJSON)
	}
	v, err := receipts.Verify(string(receipt), keys, issuer)
	var bad *receipts.InvalidError
	if errors.As(err, &bad) {
		if *asJSON {
			_ = command.PrintJSON(sys.Stdout, map[string]any{"valid": false, "reason": bad.Reason, "keyId": nil, "receipt": nil})
		}
		return fmt.Errorf("receipts verify: the receipt is not valid: %s", bad.Reason)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return command.PrintJSON(sys.Stdout, map[string]any{"valid": true, "reason": nil, "keyId": v.KeyID, "receipt": v.Receipt})
	}
	r := v.Receipt
	fmt.Fprintf(sys.Stdout, "Valid: %s signed this receipt with key %s.\n", r.Issuer, v.KeyID)
	fmt.Fprintf(sys.Stdout, "  receipt     %s, signed %s\n", r.ID, r.IssuedAtTime().Format(time.RFC3339))
	fmt.Fprintf(sys.Stdout, "  decision    %s\n", r.Decision)
	organization, recipient := r.Parties()
	if organization == "" {
		// A receipt from before the recipient had a claim of its own.
		organization = "organization " + r.OrganizationID
	} else {
		organization += " (" + r.OrganizationID + ")"
	}
	fmt.Fprintf(sys.Stdout, "  flow        %s (%s) of %s\n", r.FlowID, r.ReferenceID, organization)
	fmt.Fprintf(sys.Stdout, "  recipient   %s\n", recipient)
	fmt.Fprintf(sys.Stdout, "  definition  %s version %d, text SHA-256 %s, shown in %s\n", r.Definition.ID, r.Definition.Version,
		r.Definition.TextSHA256, r.Definition.Language)
	if r.ValidUntil != "" {
		fmt.Fprintf(sys.Stdout, "  valid until %s\n", r.ValidUntil)
	}
	if r.Previous != "" {
		fmt.Fprintf(sys.Stdout, "  replaces    %s (withdrawn by the %s)\n", r.Previous, r.WithdrawnBy)
	}
	return nil
}

// printErasureReceipt checks an erasure receipt and prints what it says.
func printErasureReceipt(stdout io.Writer, jws string, keys jose.JSONWebKeySet, issuer string, asJSON bool) error {
	v, err := erasure.VerifyReceipt(jws, keys, issuer)
	var bad *erasure.InvalidReceiptError
	if errors.As(err, &bad) {
		if asJSON {
			_ = command.PrintJSON(stdout, map[string]any{"valid": false, "reason": bad.Reason, "keyId": nil, "receipt": nil})
		}
		return fmt.Errorf("receipts verify: the erasure receipt is not valid: %s", bad.Reason)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return command.PrintJSON(stdout, map[string]any{"valid": true, "reason": nil, "keyId": v.KeyID, "receipt": nil, "erasureReceipt": v.Receipt})
	}
	r := v.Receipt
	kept := "no"
	if r.ReceiptsKept {
		kept = "yes"
	}
	fmt.Fprintf(stdout, "Valid: %s signed this erasure receipt with key %s.\n", r.Issuer, v.KeyID)
	fmt.Fprintf(stdout, "  erasure        %s, erased %s\n", r.ErasureID, r.ErasedAt)
	fmt.Fprintf(stdout, "  organization   %s (%s)\n", r.OrganizationName, r.OrganizationID)
	fmt.Fprintf(stdout, "  subject        %s\n", r.Subject)
	fmt.Fprintf(stdout, "  flows erased   %d\n", r.FlowCount)
	fmt.Fprintf(stdout, "  receipts kept  %s\n", kept)
	if r.KeyDestroyedAt != nil {
		fmt.Fprintf(stdout, "  key destroyed  %s\n", *r.KeyDestroyedAt)
	}
	fmt.Fprintf(stdout, "  what stays     %s\n", r.Retained)
	return nil
}

// loadJWKS reads a JSON Web Key Set from an http(s) URL or a file.
func loadJWKS(ctx context.Context, from string) (jose.JSONWebKeySet, error) {
	var raw []byte
	if strings.HasPrefix(from, "https://") || strings.HasPrefix(from, "http://") {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, from, nil)
		if err != nil {
			return jose.JSONWebKeySet{}, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return jose.JSONWebKeySet{}, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return jose.JSONWebKeySet{}, fmt.Errorf("%s answered %s", from, resp.Status)
		}
		if raw, err = io.ReadAll(io.LimitReader(resp.Body, maxJWKS)); err != nil {
			return jose.JSONWebKeySet{}, err
		}
	} else {
		var err error
		if raw, err = readInput(from, nil, maxJWKS); err != nil {
			return jose.JSONWebKeySet{}, err
		}
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil || len(set.Keys) == 0 {
		return jose.JSONWebKeySet{}, errors.New("not a JSON Web Key Set with keys")
	}
	return set, nil
}

// readInput reads a file, or stdin for "-", up to limit bytes.
func readInput(name string, stdin io.Reader, limit int64) ([]byte, error) {
	var r io.Reader
	if name == "-" && stdin != nil {
		r = stdin
	} else {
		f, err := os.Open(filepath.Clean(name)) // the operator names the file
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s is larger than %d bytes", name, limit)
	}
	return b, err
}
