// Package fieldcheck holds the rules of input fields that more than one module
// applies, so that a flow's webhookUrl and an organization's webhook endpoint
// are held to one rule: each returns what is wrong, as a message that names
// no field, or "" when the value is fine.
package fieldcheck

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxURL is the longest URL flowd accepts, in bytes.
const MaxURL = 2048

// URL reports what is wrong with an address flowd sends people or requests
// to: absolute, https (http only for loopback hosts unless allowInsecure), at
// most MaxURL characters, no user info.
func URL(raw string, allowInsecure bool) string {
	if len(raw) > MaxURL {
		return "must be at most " + strconv.Itoa(MaxURL) + " characters"
	}
	for _, r := range raw {
		if r <= ' ' || IsControlOrFormat(r) {
			return "must not contain spaces, control or formatting characters"
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
		if !allowInsecure && !IsLoopbackHost(u.Hostname()) {
			return "must use https (http is allowed only for localhost)"
		}
	default:
		return "must use https"
	}
	return ""
}

// IsLoopbackHost reports whether host is localhost, a name under .localhost,
// or a loopback address.
func IsLoopbackHost(host string) bool {
	host = strings.ToLower(host)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Text reports what is wrong with a text of at most max characters without
// control or formatting characters (IsControlOrFormat).
func Text(s string, max int) string {
	if utf8.RuneCountInString(s) > max {
		return "must be at most " + strconv.Itoa(max) + " characters"
	}
	if strings.ContainsFunc(s, IsControlOrFormat) {
		return ControlOrFormatMessage
	}
	return ""
}

// ControlOrFormatMessage is what Text says of a text with a character that
// IsControlOrFormat refuses.
const ControlOrFormatMessage = "must not contain control or formatting characters"

// IsControlOrFormat reports whether r may not appear in a name, reference,
// URL or other text that people read: a control character (Unicode
// category Cc), a format character (Cf), the line or paragraph separator,
// or the replacement of a byte that is not UTF-8. Format characters are
// invisible and some reorder the text around them (the bidirectional
// embeddings, overrides and isolates U+202A–U+202E and U+2066–U+2069, the
// marks U+200E, U+200F and U+061C), so that what a page shows is not what
// was stored; the zero-width space, joiners and word joiner, the byte order
// mark and the soft hyphen make two texts that look alike differ. Each of
// them is refused, with no exception for the joiners of emoji sequences or
// the soft hyphen: no field flowd takes needs them.
func IsControlOrFormat(r rune) bool {
	if r < utf8.RuneSelf {
		return r < 0x20 || r == 0x7f
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' || r == utf8.RuneError
}
