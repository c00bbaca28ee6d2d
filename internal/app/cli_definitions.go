package app

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/jsondup"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/web"
)

// runDefinitions handles "flowd definitions list|show|publish|retire": an
// organization's consent definitions, printed (with --json) exactly as the
// API shows them.
func runDefinitions(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("definitions: say list, show, publish or retire")
	}
	sub := args[0]
	fs := flag.NewFlagSet("definitions "+sub, flag.ContinueOnError)
	org := fs.String("org", "", "organization id (required)")
	asJSON := fs.Bool("json", false, "print JSON, as the API answers")
	var version *int
	var file, id *string
	switch sub {
	case "list", "retire":
	case "show":
		version = fs.Int("version", 0, "the version to show (default: the latest)")
	case "publish":
		file = fs.String("file", "", "a JSON file of the version, as POST /api/flow-definitions takes it (- for stdin)")
		id = fs.String("id", "", "the definition's id (default: the file's id)")
	default:
		return fmt.Errorf("definitions: unknown subcommand %q (list, show, publish, retire)", sub)
	}
	var name string
	if sub == "show" || sub == "retire" {
		var err error
		if name, err = parseFlagsAndName(fs, args[1:], stderr); err != nil {
			return err
		}
		if name == "" {
			return errors.New("definitions " + sub + ": name the definition: flowd definitions " + sub + " ID --org ORG_ID")
		}
	} else if err := parseFlags(fs, args[1:], stderr); err != nil {
		return err
	}
	if strings.TrimSpace(*org) == "" {
		return errors.New("definitions " + sub + ": --org is required")
	}
	author := consent.Author{OrganizationID: strings.TrimSpace(*org), By: "cli"}
	env, err := openAdmin(ctx, getenv, config.Need{}, stderr)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	defs := consent.NewDefinitions(env.pool, organizationDirectory{env.orgs, env.audit})

	var p consent.Published
	switch sub {
	case "list":
		list, err := defs.List(ctx, author.OrganizationID)
		if err != nil {
			return err
		}
		return printDefinitions(stdout, list, *asJSON)
	case "show", "retire":
		n := 0
		if sub == "retire" {
			if _, err := defs.Retire(ctx, author, name, etag.Any); err != nil {
				return definitionCLIError(err)
			}
		} else {
			n = *version
		}
		if p, err = defs.Get(ctx, author.OrganizationID, name, n); err != nil {
			return definitionCLIError(err)
		}
	case "publish":
		if p, err = publishDefinition(ctx, defs, author, *file, *id, stdin); err != nil {
			return err
		}
	}
	if *asJSON {
		return printJSON(stdout, web.NewFlowDefinition(p))
	}
	printDefinition(stdout, p)
	return nil
}

// publishDefinition publishes the version in file as the next version of
// its definition, which it creates when the organization has none of that id.
func publishDefinition(ctx context.Context, defs *consent.DefinitionStore, a consent.Author, file, id string, stdin io.Reader) (consent.Published, error) {
	if file == "" {
		return consent.Published{}, errors.New("definitions publish: --file is required")
	}
	var raw []byte
	var err error
	if file == "-" {
		raw, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
	} else {
		raw, err = os.ReadFile(filepath.Clean(file)) // the operator names the file
	}
	if err != nil {
		return consent.Published{}, err
	}
	draft, err := decodeDraft(raw)
	if err != nil {
		return consent.Published{}, fmt.Errorf("definitions publish: %s: %w", file, err)
	}
	switch {
	case id == "":
		id = draft.ID
	case draft.ID != "" && draft.ID != id:
		// The API refuses a body naming another definition than its path; so does the CLI.
		return consent.Published{}, fmt.Errorf("definitions publish: --id %q and the file's id %q differ", id, draft.ID)
	}
	if id == "" {
		return consent.Published{}, errors.New("definitions publish: name the definition with --id or the file's \"id\"")
	}
	p, err := defs.Publish(ctx, a, id, draft.Draft())
	if errors.Is(err, consent.ErrDefinitionNotFound) {
		p, err = defs.Create(ctx, a, id, draft.Draft())
	}
	return p, definitionCLIError(err)
}

// decodeDraft reads raw as the API reads a definition's body: one JSON
// object of known members, each given once, in UTF-8, with nothing after it.
func decodeDraft(raw []byte) (web.FlowDefinitionDraft, error) {
	var draft web.FlowDefinitionDraft
	if !utf8.Valid(raw) {
		return draft, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&draft); err != nil {
		if errors.Is(err, io.EOF) {
			return draft, errors.New("empty: it must hold one JSON object")
		}
		return draft, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return draft, errors.New("it must hold nothing after the JSON object")
	}
	if dups := jsondup.Find(raw); len(dups) > 0 {
		return draft, fmt.Errorf("%s is given more than once", dups[0].Path)
	}
	return draft, nil
}

// parseFlagsAndName parses a subcommand's flags and its one argument, which
// may come before, between or after them.
func parseFlagsAndName(fs *flag.FlagSet, args []string, stderr io.Writer) (string, error) {
	fs.SetOutput(stderr)
	var name string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			return name, nil
		}
		if name != "" {
			return "", fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
		}
		name, args = fs.Arg(0), fs.Args()[1:]
	}
}

// definitionCLIError names the fields of a bad version as the file does.
func definitionCLIError(err error) error {
	if errors.Is(err, consent.ErrDefinitionNotFound) {
		return errors.New("no such consent definition or version in this organization")
	}
	if _, ok := apperr.As(err); ok {
		return oneLine(err, "")
	}
	return err
}

func printDefinitions(w io.Writer, list []consent.Published, asJSON bool) error {
	if asJSON {
		out := struct {
			Data []web.FlowDefinition `json:"data"`
		}{Data: make([]web.FlowDefinition, len(list))}
		for i, p := range list {
			out.Data[i] = web.NewFlowDefinition(p)
		}
		return printJSON(w, out)
	}
	for _, p := range list {
		d, v := p.Definition, p.Version
		var marks []string
		if d.Default {
			marks = append(marks, "default")
		}
		if d.Retired() {
			marks = append(marks, "retired")
		}
		tag := ""
		if v.Tag != "" {
			tag = " (" + v.Tag + ")"
		}
		fmt.Fprintf(w, "%s  version %d%s  %s  %s\n", d.ID, v.Version, tag, strings.Join(marks, ","), v.Title.EN)
	}
	return nil
}

func printDefinition(w io.Writer, p consent.Published) {
	d, v := p.Definition, p.Version
	fmt.Fprintf(w, "%s version %d of %d", d.ID, v.Version, d.LatestVersion)
	if v.Tag != "" {
		fmt.Fprintf(w, " (%s)", v.Tag)
	}
	if d.Default {
		fmt.Fprint(w, ", the organization's default")
	}
	if d.Retired() {
		fmt.Fprintf(w, ", retired %s", d.RetiredAt.UTC().Format("2006-01-02 15:04"))
	}
	validity := v.Validity.String()
	if validity == "" {
		validity = "until withdrawn"
	}
	fmt.Fprintf(w, "\ncreated %s, this version published %s by %s\ntext SHA-256 %s\nassurance level %s, valid %s, recipient %s\n",
		d.CreatedAt.UTC().Format("2006-01-02 15:04"), v.PublishedAt.UTC().Format("2006-01-02 15:04"), v.PublishedBy, hex.EncodeToString(v.TextSHA256),
		v.AssuranceLevel, validity, v.Recipient)
	for _, lang := range []string{"en", "nb"} {
		fmt.Fprintf(w, "\n[%s] %s\n%s\n", lang, v.Title.In(lang), v.Purpose.In(lang))
		for _, c := range v.DataCategories {
			fmt.Fprintf(w, "  data: %s\n", c.In(lang))
		}
	}
}
