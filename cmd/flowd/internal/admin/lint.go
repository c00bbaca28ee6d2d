package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/consent/record"
)

// maxLinted bounds what receipts lint reads: a record of a flow with
// every parameter and data category is still far smaller.
const maxLinted = 1 << 20

// errLintFailed is what receipts lint returns when the document breaks the
// schema: it has printed why, and flowd exits 1.
var errLintFailed = errors.New("receipts lint: the document does not follow the schema")

// runReceiptsLint handles "flowd receipts lint FILE": it checks a consent
// record (JSON) or a consent receipt (its compact JWS, or its claims as
// JSON) against the schema flowd serves at /schemas/consent-record.json,
// printing each violation with its JSON pointer. It needs no database and
// no key: a receipt's signature is not checked (receipts verify does that).
func runReceiptsLint(_ context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("receipts lint", flag.ContinueOnError)
	file, err := command.ParseFlagsAndName(fs, args)
	if err != nil {
		return err
	}
	if file == "" {
		return command.Usagef("receipts lint: name the record's or receipt's file (- for stdin)")
	}
	doc, err := readInput(file, sys.Stdin, maxLinted)
	if err != nil {
		return command.Usagef("receipts lint: %v", err)
	}
	typ, isJWS := jwsType(doc)
	kind, violations, err := record.Check(doc)
	if errors.Is(err, record.ErrNotJSON) {
		fmt.Fprintf(sys.Stdout, "%s: %v\n", file, err)
		return errLintFailed
	}
	if err != nil {
		return err
	}
	if isJWS && typ != receipts.Type {
		violations = append([]record.Violation{{Pointer: "(JWS header)/typ",
			Message: fmt.Sprintf("is %q, not %q", typ, receipts.Type)}}, violations...)
	}
	if len(violations) > 0 {
		fmt.Fprintf(sys.Stdout, "%s: %d %s of the consent %s schema:\n", file, len(violations), plural(len(violations), "violation"), kind)
		for _, v := range violations {
			pointer := v.Pointer
			if pointer == "" {
				pointer = "(root)"
			}
			fmt.Fprintf(sys.Stdout, "  %s: %s\n", pointer, v.Message)
		}
		return errLintFailed
	}
	note := ""
	if isJWS {
		note = " (its signature was not checked: lint needs no key; flowd receipts verify checks it)"
	}
	fmt.Fprintf(sys.Stdout, "OK: %s is a valid consent %s%s.\n", file, kind, note)
	return nil
}

// jwsType reports whether doc is a compact JWS and, if so, its header's typ.
func jwsType(doc []byte) (typ string, ok bool) {
	parts := strings.Split(strings.TrimSpace(string(doc)), ".")
	if len(parts) != 3 || strings.HasPrefix(parts[0], "{") {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return "", true
	}
	var h struct {
		Typ string `json:"typ"`
	}
	_ = json.Unmarshal(raw, &h)
	return h.Typ, true
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
