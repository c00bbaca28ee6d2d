package admin

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

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/cmd/flowd/internal/wiring"
	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/jsondup"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/web"
)

// definitionFlags starts the flag set of a definitions command: each works
// in the organization --org names and prints JSON, as the API answers, with
// --json.
func definitionFlags(name string) (fs *flag.FlagSet, org *string, asJSON *bool) {
	fs = flag.NewFlagSet("definitions "+name, flag.ContinueOnError)
	org = fs.String("org", "", "organization id (required)")
	asJSON = fs.Bool("json", false, "print JSON, as the API answers")
	return fs, org, asJSON
}

// openDefinitions opens the consent definitions of the organization a
// definitions command names, as the CLI's author; the caller closes env's pool.
func openDefinitions(ctx context.Context, fs *flag.FlagSet, org string, sys command.Env) (*adminEnv, *consent.DefinitionStore, consent.Author, error) {
	if strings.TrimSpace(org) == "" {
		return nil, nil, consent.Author{}, command.Usagef("%s: --org is required", fs.Name())
	}
	author := consent.Author{OrganizationID: strings.TrimSpace(org), By: "cli"}
	env, err := openAdmin(ctx, sys, config.Need{})
	if err != nil {
		return nil, nil, author, err
	}
	return env, consent.NewDefinitions(env.pool, wiring.NewOrganizationDirectory(env.Orgs, env.Audit)), author, nil
}

// parseDefinitionID parses the flags of a definitions command on one
// definition, named by its argument.
func parseDefinitionID(fs *flag.FlagSet, args []string) (string, error) {
	name, err := command.ParseFlagsAndName(fs, args)
	if err == nil && name == "" {
		sub := strings.TrimPrefix(fs.Name(), "definitions ")
		err = errors.New(fs.Name() + ": name the definition: flowd definitions " + sub + " ID --org ORG_ID")
	}
	return name, err
}

// runDefinitionsList handles "flowd definitions list": an organization's
// consent definitions, each at its latest version.
func runDefinitionsList(ctx context.Context, args []string, sys command.Env) error {
	fs, org, asJSON := definitionFlags("list")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	env, defs, author, err := openDefinitions(ctx, fs, *org, sys)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	list, err := defs.List(ctx, author.OrganizationID)
	if err != nil {
		return err
	}
	return printDefinitions(sys.Stdout, list, *asJSON)
}

// runDefinitionsShow handles "flowd definitions show ID": one version of a
// consent definition, the latest unless --version names another.
func runDefinitionsShow(ctx context.Context, args []string, sys command.Env) error {
	fs, org, asJSON := definitionFlags("show")
	version := fs.Int("version", 0, "the version to show (default: the latest)")
	name, err := parseDefinitionID(fs, args)
	if err != nil {
		return err
	}
	env, defs, author, err := openDefinitions(ctx, fs, *org, sys)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	p, err := defs.Get(ctx, author.OrganizationID, name, *version)
	if err != nil {
		return definitionCLIError(err)
	}
	return printPublished(sys.Stdout, p, *asJSON)
}

// runDefinitionsPublish handles "flowd definitions publish --file FILE": the
// next version of a definition, or the first of a new one.
func runDefinitionsPublish(ctx context.Context, args []string, sys command.Env) error {
	fs, org, asJSON := definitionFlags("publish")
	file := fs.String("file", "", "a JSON file of the version, as POST /api/flow-definitions takes it (- for stdin)")
	id := fs.String("id", "", "the definition's id (default: the file's id)")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	env, defs, author, err := openDefinitions(ctx, fs, *org, sys)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	p, err := publishDefinition(ctx, defs, author, *file, *id, sys.Stdin)
	if err != nil {
		return err
	}
	return printPublished(sys.Stdout, p, *asJSON)
}

// runDefinitionsRetire handles "flowd definitions retire ID": no new flow
// uses the definition; its flows keep it.
func runDefinitionsRetire(ctx context.Context, args []string, sys command.Env) error {
	fs, org, asJSON := definitionFlags("retire")
	name, err := parseDefinitionID(fs, args)
	if err != nil {
		return err
	}
	env, defs, author, err := openDefinitions(ctx, fs, *org, sys)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	if _, err := defs.Retire(ctx, author, name, etag.Any); err != nil {
		return definitionCLIError(err)
	}
	p, err := defs.Get(ctx, author.OrganizationID, name, 0)
	if err != nil {
		return definitionCLIError(err)
	}
	return printPublished(sys.Stdout, p, *asJSON)
}

// printPublished prints a definition's version, with asJSON as the API shows it.
func printPublished(stdout io.Writer, p consent.Published, asJSON bool) error {
	if asJSON {
		return command.PrintJSON(stdout, web.NewFlowDefinition(p))
	}
	printDefinition(stdout, p)
	return nil
}

// publishDefinition publishes the version in file as the next version of
// its definition, which it creates when the organization has none of that id.
func publishDefinition(ctx context.Context, defs *consent.DefinitionStore, a consent.Author, file, id string, stdin io.Reader) (consent.Published, error) {
	if file == "" {
		return consent.Published{}, command.Usagef("definitions publish: --file is required")
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
		return command.PrintJSON(w, out)
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
