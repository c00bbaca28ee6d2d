package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// The load generator shares the machine's cores with flowd and PostgreSQL,
// so its CPU counts against flowd, while pgbench's client, the yardstick's,
// is lean C around an event loop. http.Client, or a goroutine per
// connection, woke a goroutine through Go's netpoller for every answer
// after a read that found nothing, and cost several times as much per
// request. So it works as pgbench and wrk do: an event loop waits in epoll
// for whichever keep-alive connection has an answer, reads it, and writes
// that worker's next request. docs/performance.md has the figures.

// loadConn is one worker's keep-alive connection, non-blocking, driven by
// its loop.
type loadConn struct {
	worker int
	fd     int // -1 when closed
	calls  int // requests made so far, the next one's i
	req    Request
	out    []byte
	sent   int
	in     []byte
	start  time.Time
	busy   bool // a request is out and its answer not yet read
	reused bool // the connection carried an answer before this request
}

// eventLoop drives some of the workers' connections from one thread.
type eventLoop struct {
	rawWait bool // wait in epoll_wait unseen by the scheduler (see wait)
	addr    *syscall.SockaddrInet4
	host    string
	epfd    int
	conns   map[int]*loadConn // by fd
}

func newEventLoop(base string) (*eventLoop, error) {
	host := base[len("http://"):]
	ta, err := net.ResolveTCPAddr("tcp4", host)
	if err != nil {
		return nil, err
	}
	sa := &syscall.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	return &eventLoop{addr: sa, host: host, epfd: epfd, conns: map[int]*loadConn{},
		rawWait: runtime.GOMAXPROCS(0) >= 2}, nil
}

func (l *eventLoop) close() {
	for _, c := range l.conns {
		l.hangUp(c)
	}
	syscall.Close(l.epfd)
}

// dial connects c, blocking, then makes its socket non-blocking.
func (l *eventLoop) dial(c *loadConn) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := syscall.Connect(fd, l.addr); err != nil {
		syscall.Close(fd)
		return fmt.Errorf("connect to %s: %w", l.host, err)
	}
	_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return err
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		syscall.Close(fd)
		return err
	}
	c.fd, c.reused, c.in = fd, false, c.in[:0]
	l.conns[fd] = c
	return nil
}

// dropClosed hangs up the idle connections that flowd closed since the
// last run, so that no request is sent on them.
func (l *eventLoop) dropClosed(events []syscall.EpollEvent) {
	n, err := syscall.EpollWait(l.epfd, events, 0)
	if err != nil {
		return
	}
	for _, ev := range events[:n] {
		if c := l.conns[int(ev.Fd)]; c != nil && !c.busy {
			l.hangUp(c)
		}
	}
}

func (l *eventLoop) hangUp(c *loadConn) {
	if c.fd < 0 {
		return
	}
	delete(l.conns, c.fd)
	syscall.Close(c.fd) // closing removes it from the epoll set
	c.fd, c.busy = -1, false
}

// send writes c's request, dialing first when c is closed; what the socket
// does not take at once goes when epoll says it can.
func (l *eventLoop) send(c *loadConn) error {
	if c.fd < 0 {
		if err := l.dial(c); err != nil {
			return err
		}
	}
	c.busy, c.sent, c.in = true, 0, c.in[:0]
	c.start = time.Now()
	return l.flush(c)
}

// flush writes what is left of c's request.
func (l *eventLoop) flush(c *loadConn) error {
	for c.sent < len(c.out) {
		n, err := syscall.Write(c.fd, c.out[c.sent:])
		if errors.Is(err, syscall.EAGAIN) {
			ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLOUT, Fd: int32(c.fd)}
			return syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, c.fd, &ev)
		}
		if err != nil {
			return err
		}
		c.sent += n
	}
	return nil
}

// encode writes req as c's next request.
func (l *eventLoop) encode(c *loadConn, req Request) {
	b := c.out[:0]
	b = append(b, req.Method...)
	b = append(b, ' ')
	b = append(b, req.Path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, l.host...)
	b = append(b, "\r\n"...)
	b = append(b, req.Header...)
	if req.Body != nil {
		if !bytes.Contains([]byte(req.Header), []byte("Content-Type:")) {
			b = append(b, "Content-Type: application/json\r\n"...)
		}
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(req.Body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	b = append(b, req.Body...)
	c.out = b
}

// receive reads what c's socket has and, once an answer is whole, returns
// its status and body (done true). The body aliases c's buffer.
func (l *eventLoop) receive(c *loadConn) (status int, body []byte, done bool, err error) {
	var buf [16 << 10]byte
	for {
		n, err := syscall.Read(c.fd, buf[:])
		if errors.Is(err, syscall.EAGAIN) {
			break
		}
		if errors.Is(err, syscall.ECONNRESET) && len(c.in) == 0 && c.reused {
			return 0, nil, false, errRetry // closed while idle; the request met the reset
		}
		if err != nil {
			return 0, nil, false, err
		}
		if n == 0 { // flowd closed the connection
			if status, body, done, err := parseAnswer(c.in); done || err != nil {
				return status, body, done, err
			}
			if len(c.in) == 0 && c.reused {
				return 0, nil, false, errRetry
			}
			return 0, nil, false, errors.New("connection closed mid-answer")
		}
		c.in = append(c.in, buf[:n]...)
		if n < len(buf) {
			break
		}
	}
	return parseAnswer(c.in)
}
