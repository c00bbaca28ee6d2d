// Package loadgen is flowbench's load generator: workers that each send
// one HTTP/1.1 request at a time on a keep-alive connection, driven by an
// epoll event loop, and the latencies and errors they measured.
package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Request is one HTTP request of a load worker.
type Request struct {
	Method, Path string
	Header       string // extra header lines, each ending in "\r\n"
	Body         []byte // sent with Content-Type: application/json unless Header names another
	Want         int    // the status that counts as success
	// Done, when set, sees the body of an answer with status Want; its
	// error counts as the request's.
	Done func(body []byte) error
}

// Next gives worker's i-th request, or ErrWorkerDone when the worker
// has no more to send.
type Next func(worker, i int) (Request, error)

// ErrWorkerDone ends a worker's part of a run before its time is up: the run
// ends when every worker is done.
var ErrWorkerDone = errors.New("the worker has no more requests")

// Bearer is the header line of a Bearer token.
func Bearer(token string) string { return "Authorization: Bearer " + token + "\r\n" }

// errRetry says the connection was closed by flowd while idle, before it
// answered: the request goes again on a new one.
var errRetry = errors.New("connection closed before the answer")

// parseAnswer parses an HTTP/1.1 answer with a Content-Length, which flowd
// always sends but for a 204 or 304: those have no body (RFC 9110), and Go's
// server leaves the length out. done is false while more is to come.
func parseAnswer(in []byte) (status int, body []byte, done bool, err error) {
	end := bytes.Index(in, []byte("\r\n\r\n"))
	if end < 0 {
		return 0, nil, false, nil
	}
	head := in[:end]
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	length := -1
	for len(rest) > 0 {
		var h []byte
		h, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, _ := bytes.Cut(h, []byte(":"))
		if bytes.EqualFold(name, []byte("Content-Length")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil {
				return 0, nil, false, fmt.Errorf("bad Content-Length %q", value)
			}
		}
	}
	if length < 0 && (status == 204 || status == 304) {
		length = 0
	}
	if length < 0 {
		return 0, nil, false, fmt.Errorf("answer without Content-Length (status %d)", status)
	}
	start := end + 4
	if len(in) < start+length {
		return status, nil, false, nil
	}
	if len(in) > start+length {
		return 0, nil, false, errors.New("more bytes than the answer's Content-Length")
	}
	return status, in[start : start+length], true, nil
}

// closes reports whether an answer's head asks to close the connection.
// It reads the head in place: lowering a copy of it cost an allocation and
// a pass per answer.
func closes(in []byte) bool {
	end := bytes.Index(in, []byte("\r\n\r\n"))
	if end < 0 {
		return false
	}
	_, rest, _ := bytes.Cut(in[:end], []byte("\r\n")) // past the status line
	for len(rest) > 0 {
		var h []byte
		h, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, _ := bytes.Cut(h, []byte(":"))
		if bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(bytes.TrimSpace(value), []byte("close")) {
			return true
		}
	}
	return false
}
