package flows

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/flowd/flowd/internal/apperr"
)

// Rules are the settings a new flow is validated against.
type Rules struct {
	NationalIDFormat  string   // FormatGeneric, FormatNorway or FormatSweden
	AllowInsecureURLs bool     // http allowed for any host, not only loopback
	RedirectOrigins   []string // allowed redirectUrl origins; empty allows any
}

// Limits of a new flow's fields.
const (
	MaxLastName      = 200
	MaxReferenceName = 200
	MaxURL           = 2048
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
	}
}

// Validate checks a normalized in against r and returns an apperr Invalid
// error naming every offending field by its API name, or nil.
func (in NewFlow) Validate(r Rules) error {
	var f apperr.Fields
	if in.NationalID == "" {
		f.Add("nationalId", "is required")
	} else if msg := CheckNationalID(r.NationalIDFormat, in.NationalID); msg != "" {
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
	return f.Err()
}

// checkText allows up to max characters of text without control characters.
func checkText(s string, max int) string {
	if utf8.RuneCountInString(s) > max {
		return "must be at most " + strconv.Itoa(max) + " characters"
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return "must not contain control characters"
		}
	}
	return ""
}

// CheckURL reports what is wrong with an address flowd sends people or
// requests to, or "" when it is fine: absolute, https (http only for loopback
// hosts unless allowInsecure), at most MaxURL characters, no user info.
func CheckURL(raw string, allowInsecure bool) string {
	if len(raw) > MaxURL {
		return "must be at most " + strconv.Itoa(MaxURL) + " characters"
	}
	for _, r := range raw {
		if r <= ' ' || r == 0x7f {
			return "must not contain spaces or control characters"
		}
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Hostname() == "" {
		return "must be an absolute URL such as https://example.com/path"
	}
	if u.User != nil {
		return "must not contain a user name or password"
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !allowInsecure && !isLoopback(u.Hostname()) {
			return "must use https (http is allowed only for localhost)"
		}
	default:
		return "must use https"
	}
	return ""
}

func isLoopback(host string) bool {
	host = strings.ToLower(host)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

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
