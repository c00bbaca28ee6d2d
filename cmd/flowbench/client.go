package main

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// request is one HTTP request of a load worker.
type request struct {
	method, path string
	header       string // extra header lines, each ending in "\r\n"
	body         []byte // sent with Content-Type: application/json unless header names another
	want         int    // the status that counts as success
	// done, when set, sees the body of an answer with status want; its
	// error counts as the request's.
	done func(body []byte) error
}

// nextRequest gives worker's i-th request, or errWorkerDone when the worker
// has no more to send.
type nextRequest func(worker, i int) (request, error)

// errWorkerDone ends a worker's part of a run before its time is up: the run
// ends when every worker is done.
var errWorkerDone = errors.New("the worker has no more requests")

// bearer is the header line of a bearer token.
func bearer(token string) string { return "Authorization: Bearer " + token + "\r\n" }

// errRetry says the connection was closed by flowd while idle, before it
// answered: the request goes again on a new one.
var errRetry = errors.New("connection closed before the answer")

// parseAnswer parses an HTTP/1.1 answer with a Content-Length, which flowd
// always sends; done is false while more is to come.
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
