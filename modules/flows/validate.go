package flows

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/fieldcheck"
	"github.com/flowd/flowd/internal/nationalid"
)

// Rules are the settings a new flow is validated against.
type Rules struct {
	NationalIDs       nationalid.Format // the national id format and its clock
	AllowInsecureURLs bool              // http allowed for any host, not only loopback
	RedirectOrigins   []string          // allowed redirectUrl origins; empty allows any
}

// Limits of a new flow's fields.
const (
	MaxLastName      = 200
	MaxReferenceName = 200
	MaxURL           = fieldcheck.MaxURL
)

// Normalize trims the surrounding white space of every field of in.
func (in NewFlow) Normalize() NewFlow {
	return NewFlow{
		NationalID:            strings.TrimSpace(in.NationalID),
		LastName:              strings.TrimSpace(in.LastName),
		RedirectURL:           strings.TrimSpace(in.RedirectURL),
		WebhookURL:            strings.TrimSpace(in.WebhookURL),
		ReferenceName:         strings.TrimSpace(in.ReferenceName),
		FlowDefinitionID:      strings.TrimSpace(in.FlowDefinitionID),
		FlowDefinitionVersion: in.FlowDefinitionVersion,
		Parameters:            trimValues(in.Parameters),
	}
}

func trimValues(values map[string]string) map[string]string {
	if len(values) == 0 {
		return nil
	}
	out := make(map[string]string, len(values))
	for k, v := range values {
		out[k] = strings.TrimSpace(v)
	}
	return out
}

// MaxParameterValue is the longest value of a flow's parameter, in
// characters.
const MaxParameterValue = 200

// CheckParameters checks a flow's parameter values against the names its
// definition version declares: each declared one valued, no other. Either
// is an apperr Unprocessable error naming parameters.<name>.
func CheckParameters(values map[string]string, declared []string, definitionID string, version int) error {
	var f []apperr.FieldError
	for _, name := range declared {
		if _, ok := values[name]; !ok {
			f = append(f, apperr.FieldError{Field: "parameters." + name,
				Message: fmt.Sprintf("is required: consent definition %q version %d shows it", definitionID, version)})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if !slices.Contains(declared, name) {
			f = append(f, apperr.FieldError{Field: "parameters." + name,
				Message: fmt.Sprintf("is not a parameter of consent definition %q version %d", definitionID, version)})
		}
	}
	if len(f) > 0 {
		return apperr.UnprocessableFields(f)
	}
	return nil
}

// Validate checks a normalized in against r and returns an apperr Invalid
// error naming every offending field by its API name, or nil.
func (in NewFlow) Validate(r Rules) error {
	var f apperr.Fields
	if in.NationalID == "" {
		f.Add("nationalId", "is required")
	} else if msg := r.NationalIDs.Check(in.NationalID); msg != "" {
		f.Add("nationalId", "%s", msg)
	}
	if in.LastName == "" {
		f.Add("lastName", "is required")
	} else if msg := checkText(in.LastName, MaxLastName); msg != "" {
		f.Add("lastName", "%s", msg)
	}
	if in.RedirectURL == "" {
		f.Add("redirectUrl", "is required")
	} else if msg := CheckURL(in.RedirectURL, r.AllowInsecureURLs); msg != "" {
		f.Add("redirectUrl", "%s", msg)
	} else if !originAllowed(in.RedirectURL, r.RedirectOrigins) {
		f.Add("redirectUrl", "must start with one of the organization's allowed redirect origins")
	}
	if in.WebhookURL != "" {
		if msg := CheckURL(in.WebhookURL, r.AllowInsecureURLs); msg != "" {
			f.Add("webhookUrl", "%s", msg)
		}
	}
	if in.ReferenceName != "" {
		if msg := checkText(in.ReferenceName, MaxReferenceName); msg != "" {
			f.Add("referenceName", "%s", msg)
		}
	}
	if len(in.FlowDefinitionID) > 64 || !utf8.ValidString(in.FlowDefinitionID) || strings.ContainsRune(in.FlowDefinitionID, 0) {
		f.Add("flowDefinitionId", "must be a consent definition id of at most 64 characters")
	}
	if in.FlowDefinitionVersion < 0 {
		f.Add("flowDefinitionVersion", "must be a version number from 1")
	}
	for _, name := range slices.Sorted(maps.Keys(in.Parameters)) {
		if v := in.Parameters[name]; v == "" {
			f.Add("parameters."+name, "must not be empty")
		} else if msg := checkText(v, MaxParameterValue); msg != "" || len(name) > 64 {
			f.Add("parameters."+name, "must be a name of at most 64 characters with a text of at most %d characters without control or formatting characters", MaxParameterValue)
		}
	}
	return f.Err()
}

// checkText allows up to max characters of text without control or
// formatting characters.
func checkText(s string, max int) string { return fieldcheck.Text(s, max) }

// CheckURL reports what is wrong with an address flowd sends people or
// requests to, or "" when it is fine: absolute, https (http only for loopback
// hosts unless allowInsecure), at most MaxURL characters, no user info. The
// webhooks module holds its endpoints to the same rule (fieldcheck.URL).
func CheckURL(raw string, allowInsecure bool) string { return fieldcheck.URL(raw, allowInsecure) }

// originAllowed reports whether raw's origin (scheme, host and port) is one
// of origins; an empty list allows any.
func originAllowed(raw string, origins []string) bool {
	if len(origins) == 0 {
		return true
	}
	o := Origin(raw)
	for _, allowed := range origins {
		if Origin(allowed) == o {
			return true
		}
	}
	return false
}

// Origin returns the lower-case scheme://host[:port] of an absolute URL, the
// default port left out, or "" when raw is not one.
func Origin(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return ""
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host
}
