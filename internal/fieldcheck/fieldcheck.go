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
// control characters.
func Text(s string, max int) string {
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
