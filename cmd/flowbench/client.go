package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"os"
	"strconv"
	"time"
)

// loadConn is one load worker's keep-alive HTTP/1.1 connection to flowd: it
// writes each request in one write and parses only the status line and the
// headers it needs, without http.Transport's two goroutines and channel
// hand-offs per connection. The load generator shares the 2 cores with flowd
// and PostgreSQL, and pgbench's client, the yardstick's, is lean C: with
// http.Client the generator took ~70 µs of CPU per request, a quarter of the
// machine, and the ratios measured the generator as much as flowd.
type loadConn struct {
	addr string // host:port
	conn net.Conn
	br   *bufio.Reader
	buf  []byte
}

func newLoadConn(base string) *loadConn {
	return &loadConn{addr: base[len("http://"):], buf: make([]byte, 0, 1024)}
}

// do sends one request with the bearer token auth and reads the whole answer;
// a status other than want is an error. A connection flowd closed is
// reopened once.
func (l *loadConn) do(ctx context.Context, auth, method, path string, body []byte, want int) ([]byte, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	for attempt := 0; ; attempt++ {
		out, status, err := l.roundTrip(deadline, auth, method, path, body)
		if err != nil {
			l.close()
			if errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(deadline) {
				// The run ended mid-request: the connection's deadline is
				// the context's and may fire a moment before the context's.
				return nil, context.DeadlineExceeded
			}
			if attempt == 0 && ctx.Err() == nil {
				continue
			}
			return nil, err
		}
		if status != want {
			return out, fmt.Errorf("%s %s: %d %s", method, path, status, truncate(out, 200))
		}
		return out, nil
	}
}

func (l *loadConn) roundTrip(deadline time.Time, auth, method, path string, body []byte) ([]byte, int, error) {
	if l.conn == nil {
		c, err := net.DialTimeout("tcp", l.addr, 5*time.Second)
		if err != nil {
			return nil, 0, err
		}
		l.conn, l.br = c, bufio.NewReaderSize(c, 16<<10)
	}
	_ = l.conn.SetDeadline(deadline)
	b := l.buf[:0]
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, l.addr...)
	b = append(b, "\r\nAuthorization: "...)
	b = append(b, auth...)
	if body != nil {
		b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
	}
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	l.buf = b
	if _, err := l.conn.Write(b); err != nil {
		return nil, 0, err
	}
	return l.readResponse()
}

// readResponse reads a status line, the headers it needs and the body:
// Content-Length or chunked, and whether flowd will close the connection.
func (l *loadConn) readResponse() ([]byte, int, error) {
	line, err := l.line()
	if err != nil {
		return nil, 0, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return nil, 0, fmt.Errorf("bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return nil, 0, fmt.Errorf("bad status line %q", line)
	}
	length, chunked, closing := -1, false, false
	for {
		line, err := l.line()
		if err != nil {
			return nil, 0, err
		}
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return nil, 0, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closing = bytes.EqualFold(value, []byte("close"))
		}
	}
	var body []byte
	switch {
	case chunked:
		body, err = io.ReadAll(httputil.NewChunkedReader(l.br))
		if err == nil {
			_, err = l.line() // the empty trailer
		}
	case length >= 0:
		body = make([]byte, length)
		_, err = io.ReadFull(l.br, body)
	default:
		body, err = io.ReadAll(l.br)
		closing = true
	}
	if err != nil {
		return nil, 0, err
	}
	if closing {
		l.close()
	}
	return body, status, nil
}

// line reads one header line without its CRLF.
func (l *loadConn) line() ([]byte, error) {
	line, err := l.br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n"), nil
}

func (l *loadConn) close() {
	if l.conn != nil {
		l.conn.Close()
		l.conn, l.br = nil, nil
	}
}
